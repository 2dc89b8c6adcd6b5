/**
 * Synthetic bucket contents for the benchmark: up to millions of objects in
 * seconds, deterministic for a given seed, shaped like a swamp datastore so
 * that prefixes, partitions and internal keys look like the real thing.
 * Bodies are not stored (see synthetic.ts).
 */
import type { Bucket } from './store';
import { StoredObject, compareKeys } from './store';
import { syntheticEtag } from './synthetic';

/**
 * `swamp`: datastore-shaped keys (see CONTRACT.md); `flat`: `obj/<12 hex digits>`
 * keys spread evenly, so the 16 prefixes `obj/0` ... `obj/f` split them evenly.
 */
export type SeedLayout = 'swamp' | 'flat';

export interface SeedOptions {
  /** How many objects to add. */
  readonly count: number;
  /** Datastore root prefix; keys become `<prefix>/<rel>`. Empty or absent: the bucket root. */
  readonly prefix?: string;
  readonly layout?: SeedLayout;
  /** PRNG seed; the same seed, count and layout give the same keys, sizes and dates. */
  readonly seed?: number;
  /** The newest Last-Modified; objects are spread over the 30 days before it. */
  readonly lastModified?: Date;
  /**
   * Index partitions of the swamp layout at least (see CONTRACT.md): models `data/bench/model-<n>/` are
   * added until the layout has this many. @default the layout's own, 119
   */
  readonly partitions?: number;
}

export interface SeedResult {
  /** Objects added (or replaced, if a key already existed). */
  readonly count: number;
  readonly totalBytes: number;
  readonly elapsedMs: number;
}

const DEFAULT_LAST_MODIFIED = Date.UTC(2026, 4, 1, 12, 0, 0);
const SPREAD_MS = 30 * 24 * 3600 * 1000;
/** Sizes are multiples of this, so few distinct sizes exist and each synthetic ETag is hashed once. */
const SIZE_STEP = 64;
const MAX_SIZE = 64 * 1024;

/** mulberry32: tiny, fast, and good enough to make keys and sizes look random. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TYPES: ReadonlyArray<readonly [string, readonly string[]]> = [
  ['aws', ['ec2', 's3', 'vpc', 'iam-role', 'lambda', 'rds', 'route53']],
  ['gcp', ['compute', 'gcs', 'gke', 'cloudsql']],
  ['azure', ['vm', 'storage', 'aks']],
  ['k8s', ['pod', 'deployment', 'service', 'configmap', 'namespace']],
  ['github', ['repo', 'workflow', 'team']],
  ['cloudflare', ['zone', 'dns-record', 'worker']],
  ['tailscale', ['device', 'acl']],
  ['swamp', ['host', 'check', 'secret-ref']],
];
const WORKFLOWS = [
  'nightly-sync',
  'drift-check',
  'cost-report',
  'patch-hosts',
  'rotate-keys',
  'backup-verify',
  'dns-audit',
  'cert-renew',
  'deploy-api',
  'deploy-web',
  'scale-down',
  'scale-up',
  'inventory',
  'compliance',
  'tag-audit',
  'cleanup-snapshots',
  'db-vacuum',
  'log-ship',
  'iam-review',
  'vpc-flow',
  'canary',
  'smoke-test',
  'chaos-drill',
  'release-notes',
];
/** Internal keys (never indexed, per the contract) that a real datastore may hold. */
const INTERNAL = ['_catalog.db', '_catalog.db-shm', '_catalog.db-wal', '.datastore-sync-state.json'];

/** A log-normal size (median `median` bytes), rounded up to SIZE_STEP and capped. */
function sizeFrom(random: () => number, median: number): number {
  const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const raw = median * Math.exp(z);
  return Math.min(MAX_SIZE, Math.max(SIZE_STEP, Math.ceil(raw / SIZE_STEP) * SIZE_STEP));
}

/** Share of the objects in each top-level folder of the swamp layout. */
const FOLDER_SHARES: ReadonlyArray<readonly [string, number]> = [
  ['data', 0.7],
  ['workflow-runs', 0.1],
  ['logs', 0.08],
  ['outputs', 0.04],
  ['definitions-evaluated', 0.02],
  ['workflows-evaluated', 0.01],
  ['audit', 0.02],
  ['telemetry', 0.02],
  ['files', 0.01],
];

/**
 * A run of keys `<stem><id><suffix>` under one folder (e.g. stem
 * `data/aws/ec2/ec2-`, suffixes `/1/raw`, `/2/raw`, ...): ids rise and have a
 * fixed width, and versions of one id come in order, so a group's keys are
 * made in S3 order. Emitting groups in order of their heads then yields the
 * whole bucket sorted, and seeding never sorts a million strings.
 */
interface Group {
  readonly folder: string;
  /** Sort position of the whole group: its folder prefix, or the key itself for a one-key group. */
  readonly head: string;
  readonly stem: string;
  /** One suffix per version; an entity gets a random number (1..length) of them. */
  readonly suffixes: readonly string[];
  readonly medianSize: number;
  readonly contentType: string;
  /** Relative size among the groups of its folder. */
  readonly weight: number;
  quota: number;
}

/** Partitions of `swampGroups` without extra models: 3 folders of 30 models, 24 workflows, 5 plain folders. */
export const SWAMP_PARTITIONS = 3 * 30 + 24 + 5;

function swampGroups(random: () => number, partitions = SWAMP_PARTITIONS): Group[] {
  const groups: Group[] = [];
  const add = (folder: string, head: string, stem: string, suffixes: string[], medianSize: number, contentType: string): void => {
    groups.push({ folder, head, stem, suffixes, medianSize, contentType, weight: 0.2 + random(), quota: 0 });
  };
  for (const [folder, leaf, contentType] of [
    ['data', 'raw', 'application/octet-stream'],
    ['outputs', 'result.json', 'application/json'],
    ['definitions-evaluated', 'definition.yaml', 'application/yaml'],
  ] as const) {
    for (const [type, models] of TYPES) {
      for (const model of models) {
        // An object usually has a few versions, stored side by side.
        const prefix = `${folder}/${type}/${model}/`;
        add(
          folder,
          prefix,
          `${prefix}${model}-`,
          ['1', '2', '3'].map((v) => `/${v}/${leaf}`),
          4096,
          contentType,
        );
      }
    }
  }
  for (const wf of WORKFLOWS) {
    add('workflow-runs', `workflow-runs/${wf}/`, `workflow-runs/${wf}/run-`, ['.json'], 2048, 'application/json');
    add('logs', `logs/${wf}/`, `logs/${wf}/run-`, ['.log'], 16384, 'text/plain');
    add('workflows-evaluated', `workflows-evaluated/${wf}/`, `workflows-evaluated/${wf}/`, ['.yaml'], 2048, 'application/yaml');
  }
  for (let d = 0; d < 30; d++) {
    const day = new Date(DEFAULT_LAST_MODIFIED - d * 86400000).toISOString().slice(0, 10);
    add('audit', `audit/${day}/`, `audit/${day}/`, ['.json'], 1024, 'application/json');
    add('telemetry', `telemetry/${day}/`, `telemetry/${day}/`, ['.json'], 1024, 'application/json');
  }
  add('files', 'files/shared/', 'files/shared/', ['.bin'], 8192, 'application/octet-stream');
  // Each extra model is one more partition (`data--bench--model-<n>`).
  for (let n = 0; n < partitions - SWAMP_PARTITIONS; n++) {
    const model = `model-${String(n).padStart(5, '0')}`;
    const prefix = `data/bench/${model}/`;
    add('data', prefix, `${prefix}${model}-`, ['/1/raw', '/2/raw'], 4096, 'application/octet-stream');
  }
  return groups;
}

/** Splits `total` over groups by folder share, then by each group's weight (largest remainder). */
function allocate(groups: Group[], total: number): void {
  const weightByFolder = new Map<string, number>();
  for (const g of groups) weightByFolder.set(g.folder, (weightByFolder.get(g.folder) ?? 0) + g.weight);
  const share = new Map(FOLDER_SHARES);
  const exact = groups.map((g) => (total * (share.get(g.folder) ?? 0) * g.weight) / (weightByFolder.get(g.folder) ?? 1));
  groups.forEach((g, i) => {
    g.quota = Math.floor(exact[i]);
  });
  let left = total - groups.reduce((sum, g) => sum + g.quota, 0);
  const byRemainder = groups.map((_, i) => i).sort((a, b) => (exact[b] % 1) - (exact[a] % 1));
  for (let k = 0; left > 0; k = (k + 1) % groups.length, left--) groups[byRemainder[k]].quota++;
}

/** The groups of a layout, quotas set, in the order their keys must be emitted. */
function layoutGroups(layout: SeedLayout, random: () => number, count: number, partitions?: number): Group[] {
  if (layout === 'flat') {
    // `obj/<12 hex digits>`: ids spread evenly, so `obj/0` ... `obj/f` split it in 16.
    return [
      {
        folder: 'obj',
        head: 'obj/',
        stem: 'obj/',
        suffixes: [''],
        medianSize: 1024,
        contentType: 'application/octet-stream',
        weight: 1,
        quota: count,
      },
    ];
  }
  const internal: Group[] = INTERNAL.slice(0, count).map((key) => ({
    folder: '',
    head: key,
    stem: key,
    suffixes: [],
    medianSize: 4096,
    contentType: 'application/octet-stream',
    weight: 0,
    quota: 1,
  }));
  const groups = swampGroups(random, partitions);
  allocate(groups, count - internal.length);
  // Internal keys have no `/` and none is a prefix of a group's head, so
  // ordering the heads orders every key.
  return [...internal, ...groups].sort((a, b) => compareKeys(a.head, b.head));
}

/** Adds `options.count` synthetic objects to `bucket`. */
export function seedBucket(bucket: Bucket, options: SeedOptions): SeedResult {
  const started = performance.now();
  const count = Math.max(0, Math.floor(options.count));
  const random = prng(options.seed ?? 1);
  const root = options.prefix ? `${options.prefix.replace(/\/+$/, '')}/` : '';
  const newest = options.lastModified?.getTime() ?? DEFAULT_LAST_MODIFIED;
  const keys = new Array<string>(count);
  const objects = new Array<StoredObject>(count);
  let made = 0;
  let totalBytes = 0;
  const emit = (key: string, group: Group): void => {
    const size = sizeFrom(random, group.medianSize);
    const lastModifiedMs = Math.floor((newest - random() * SPREAD_MS) / 1000) * 1000;
    keys[made] = key;
    objects[made++] = new StoredObject(size, syntheticEtag(size), lastModifiedMs, group.contentType, null, null, null);
    totalBytes += size;
  };
  for (const group of layoutGroups(options.layout ?? 'swamp', random, count, options.partitions)) {
    const stem = root + group.stem;
    if (group.suffixes.length === 0) {
      emit(stem, group);
      continue;
    }
    // One id per stratum of [0, 2^48), a stratum per entity: rising, spread over the whole range (so the
    // leading hex digit splits a group evenly), 12 hex digits wide. Each entity's versions are drawn first,
    // so that there are as many strata as entities.
    const versions: number[] = [];
    for (let left = group.quota; left > 0; ) {
      const v = Math.min(left, 1 + Math.floor(random() * group.suffixes.length));
      versions.push(v);
      left -= v;
    }
    const stratum = 2 ** 48 / versions.length;
    for (let k = 0; k < versions.length; k++) {
      // Two draws: one has only 32 bits, too few to fill 48.
      const offset = random() + random() / 4294967296;
      const entity =
        stem +
        Math.floor((k + offset) * stratum)
          .toString(16)
          .padStart(12, '0');
      for (let v = 0; v < versions[k]; v++) emit(entity + group.suffixes[v], group);
    }
  }
  bucket.putMany(keys, objects);
  return { count, totalBytes, elapsedMs: performance.now() - started };
}
