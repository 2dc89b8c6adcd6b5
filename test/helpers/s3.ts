/**
 * S3 test helpers: unique buckets on the test endpoint (moto, started by the jest global setup),
 * a swamp-like datastore seeder that returns what every index should hold, readers and writers
 * for indexes and objects, request logs and fault injection.
 *
 * The helpers talk to S3 with raw SDK commands, never through the library under test, so an
 * assertion made with them checks the bucket itself. They do go through the client of the
 * `S3Store` they are given, so they bump its `requests` counters: when a test asserts on
 * counters, give the code under test its own store (`connectStore(bucket)`).
 *
 * Clients made here are destroyed after the test file (an `afterAll` is registered on import).
 *
 * @example
 * const store = await testStore();
 * const seeded = await seedDatastore(store, { prefix: 'swamp', internal: true, namespaces: ['ns1'] });
 * await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
 * expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { type DatastoreIndex, type IndexEntry, parseIndex } from '../../lambda/lib/index-file';
import type { DatastoreRoot, IndexScope } from '../../lambda/lib/scope';
import type { S3Settings } from '../../lambda/lib/config';
import type { ShardMeta } from '../../lambda/lib/layouts/manifest';
import { S3Store, unquoteEtag } from '../../lambda/lib/s3';
import { INDEX_KEY, SHARD_DIR, SHARD_META_KEY, scopeBase } from '../../lambda/lib/names';
import { createS3Client } from '../../lambda/lib/s3-client';
import { mapLimit } from '../../lambda/lib/concurrency';
import { partitionOf } from '../../lambda/lib/keys';
import { indexJson, namespaceMarker, shardJson } from './factories';

// ---------------------------------------------------------------------------------------------
// Endpoint, clients, buckets
// ---------------------------------------------------------------------------------------------

const clients = new Set<S3Client>();

/** Destroys every client the helpers made (their keep-alive sockets would keep jest waiting). */
export function closeTestClients(): void {
  for (const client of clients) client.destroy();
  clients.clear();
}

if (typeof afterAll === 'function') afterAll(closeTestClients);

/** The S3 endpoint of the test run; the jest global setup sets it (a moto server on 127.0.0.1). */
export function testEndpoint(): string {
  const endpoint = process.env.S3_TEST_ENDPOINT;
  if (!endpoint) throw new Error('S3_TEST_ENDPOINT is not set: run the S3 tests through jest, whose global setup starts moto');
  return endpoint;
}

/** swamp's S3 settings for the test endpoint: `{endpoint, forcePathStyle: true, region}`. */
export function testSettings(): S3Settings {
  return { endpoint: testEndpoint(), forcePathStyle: true, region: process.env.AWS_REGION ?? 'us-east-1' };
}

/** A client for the test endpoint made by the library's `createS3Client` (same retries), destroyed after the file. */
export function testClient(overrides: Partial<S3ClientConfig> = {}): S3Client {
  const client = createS3Client(testSettings(), overrides);
  clients.add(client);
  return client;
}

/** A new `S3Store` (with its own client and zeroed `requests` counters) on an existing bucket. */
export function connectStore(bucket: string, overrides: Partial<S3ClientConfig> = {}): S3Store {
  return new S3Store(testClient(overrides), bucket);
}

/** A bucket name no other test uses: `<prefix>-<time>-<random>`, valid for S3. */
export function uniqueBucketName(prefix = 'test'): string {
  const clean =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '-')
      .slice(0, 30) || 'test';
  return `${clean}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

/** Creates a uniquely named bucket on the test endpoint and returns its name. */
export async function createTestBucket(prefix = 'test'): Promise<string> {
  const bucket = uniqueBucketName(prefix);
  await testClient().send(new CreateBucketCommand({ Bucket: bucket }));
  return bucket;
}

/** Options of {@link testStore}. */
export interface TestStoreOptions {
  /** Use this bucket instead of creating one. */
  readonly bucket?: string;
  /** Name prefix of the created bucket. @default 'test' */
  readonly bucketPrefix?: string;
  /** Client settings to override (e.g. `maxAttempts`, a fault-injecting `requestHandler`). */
  readonly client?: Partial<S3ClientConfig>;
}

/** An `S3Store` on a fresh unique bucket (or on `options.bucket`), reached with forcePathStyle. */
export async function testStore(options: TestStoreOptions = {}): Promise<S3Store> {
  const bucket = options.bucket ?? (await createTestBucket(options.bucketPrefix));
  return connectStore(bucket, options.client);
}

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------

/** An object as listed: full key, size, last-modified time (ISO) and ETag without quotes. */
export interface BucketObject {
  readonly key: string;
  readonly size: number;
  readonly lastModified: string;
  readonly etag: string;
}

/** Writes one object unconditionally; returns its ETag without quotes. */
export async function putObject(store: S3Store, key: string, body: string | Buffer): Promise<string> {
  const out = await store.client.send(new PutObjectCommand({ Bucket: store.bucket, Key: key, Body: body }));
  return (out.ETag ?? '').replace(/"/g, '');
}

/** Writes many objects (full key → body), `concurrency` at a time (moto seeds slowly: keep seeds small). */
export async function putObjects(store: S3Store, objects: Readonly<Record<string, string | Buffer>>, concurrency = 8): Promise<void> {
  await mapLimit(Object.entries(objects), concurrency, ([key, body]) => putObject(store, key, body));
}

/** Reads an object's bytes, or undefined when it does not exist. */
export async function readObject(store: S3Store, key: string): Promise<Buffer | undefined> {
  try {
    const out = await store.client.send(new GetObjectCommand({ Bucket: store.bucket, Key: key }));
    return Buffer.from(await out.Body!.transformToByteArray());
  } catch (err) {
    if ((err as { name?: string }).name === 'NoSuchKey') return undefined;
    throw err;
  }
}

/** Reads an object as JSON, or undefined when it does not exist. */
export async function readJson<T = unknown>(store: S3Store, key: string): Promise<T | undefined> {
  const body = await readObject(store, key);
  return body === undefined ? undefined : (JSON.parse(body.toString('utf8')) as T);
}

/** Deletes an object. */
export async function deleteObject(store: S3Store, key: string): Promise<void> {
  await store.client.send(new DeleteObjectCommand({ Bucket: store.bucket, Key: key }));
}

/** Every object under `prefix` with its metadata, sorted by key. */
export async function listObjects(store: S3Store, prefix = ''): Promise<BucketObject[]> {
  const objects: BucketObject[] = [];
  let token: string | undefined;
  do {
    const out = await store.client.send(
      new ListObjectsV2Command({ Bucket: store.bucket, Prefix: prefix || undefined, ContinuationToken: token }),
    );
    for (const o of out.Contents ?? []) {
      objects.push({
        key: o.Key ?? '',
        size: o.Size ?? 0,
        lastModified: (o.LastModified ?? new Date(0)).toISOString(),
        etag: (o.ETag ?? '').replace(/"/g, ''),
      });
    }
    token = out.IsTruncated ? out.NextContinuationToken : undefined;
  } while (token);
  return objects.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** Every full key under `prefix`, sorted. */
export async function listKeys(store: S3Store, prefix = ''): Promise<string[]> {
  return (await listObjects(store, prefix)).map((o) => o.key);
}

/** The bucket's state under `prefix` as `key → etag`; two equal snapshots mean nothing was written or deleted. */
export async function snapshotBucket(store: S3Store, prefix = ''): Promise<Map<string, string>> {
  return new Map((await listObjects(store, prefix)).map((o) => [o.key, o.etag]));
}

// ---------------------------------------------------------------------------------------------
// Indexes
// ---------------------------------------------------------------------------------------------

/** Reads and parses the index (or shard) at `key`; undefined when absent, an error naming the reason when unreadable. */
export async function readIndex(store: S3Store, key: string): Promise<DatastoreIndex | undefined> {
  const body = await readObject(store, key);
  if (body === undefined) return undefined;
  const parsed = parseIndex(body);
  if (!parsed.ok) throw new Error(`s3://${store.bucket}/${key} is unreadable: ${parsed.reason}`);
  return parsed.index;
}

/** Writes an index at `key` as a swamp client does (pretty JSON, unconditionally); returns its ETag. */
export async function putIndex(
  store: S3Store,
  key: string,
  entries: Iterable<IndexEntry> | DatastoreIndex,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const isIndex = (v: unknown): v is DatastoreIndex =>
    typeof v === 'object' && v !== null && 'entries' in v && (v as DatastoreIndex).entries instanceof Map;
  if (isIndex(entries))
    return putObject(store, key, indexJson(entries.entries.values(), { ...entries.extra, ...extra }, entries.lastPulled));
  return putObject(store, key, indexJson(entries, extra));
}

/** The comparable core of an index or listing: `{key, size}` sorted by key. */
export interface KeySize {
  readonly key: string;
  readonly size: number;
}

/** `{key, size}` of every entry, sorted by key; undefined (absent index) gives `[]`. */
export function summarize(index: DatastoreIndex | ReadonlyMap<string, { key: string; size: number }> | undefined): KeySize[] {
  if (!index) return [];
  const entries = index instanceof Map ? index : (index as DatastoreIndex).entries;
  return sortByKey([...entries.values()].map((e) => ({ key: e.key, size: e.size })));
}

/** Sorts rows by `key` (code-unit order, as S3 lists). */
export function sortByKey<T extends { readonly key: string }>(rows: T[]): T[] {
  return rows.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

// ---------------------------------------------------------------------------------------------
// A swamp-like datastore
// ---------------------------------------------------------------------------------------------

/** Options of {@link seedDatastore}. */
export interface SeedOptions {
  /** The root's key prefix. @default '' (no prefix) */
  readonly prefix?: string;
  /**
   * Data objects of each scope: a count of generated swamp-like keys spread over the standard folders
   * (every shard-partition rule gets a key), or explicit relative key → body. @default 8
   */
  readonly objects?: number | Readonly<Record<string, string | Buffer>>;
  /** Also seed keys that must never be indexed (push queue, catalog db and its WAL, `.lock` files, `_control/`, `_index/` scratch). @default false */
  readonly internal?: boolean;
  /** Namespaces to create, each with its `.namespace.json` marker and its own objects (and internal keys). @default [] */
  readonly namespaces?: readonly string[];
}

/** A seeded datastore and what each of its indexes should hold. */
export interface SeededDatastore {
  readonly store: S3Store;
  readonly root: DatastoreRoot;
  /** Data objects by scope ('' is the root's own index, other names are namespaces): relative key → body. */
  readonly objects: ReadonlyMap<string, ReadonlyMap<string, Buffer>>;
  /** What each index should hold, by scope ('' is the root's own index): `{key, size}` sorted by key. */
  readonly expected: ReadonlyMap<string, KeySize[]>;
  /** Full keys of the internal objects seeded (never indexed). */
  readonly internalKeys: readonly string[];
  /** The scope of the root's own index, or of a namespace. */
  scope(namespace?: string): IndexScope;
  /** Full key of a scope's monolithic index. */
  indexKey(namespace?: string): string;
  /** Full key of a key relative to a scope. */
  fullKey(rel: string, namespace?: string): string;
  /** What a scope's index should hold: `{key, size}` sorted by key. */
  expectedEntries(namespace?: string): KeySize[];
}

/** `count` swamp-like relative keys covering the standard folders and every partition rule. */
export function swampKeys(count: number, tag = ''): string[] {
  const t = tag ? `${tag}-` : '';
  const templates = [
    (i: number) => `data/aws/ec2/${t}i-${i}/1/raw`, // 6 segments: data--aws--ec2
    (i: number) => `outputs/${t}model-${i}/run/out.json`, // 4 segments: outputs--model-i--run
    (i: number) => `workflow-runs/${t}wf-${i % 3}/run-${i}.yaml`, // workflow-runs--wf-n
    (i: number) => `logs/${t}run-${i}.log`,
    (i: number) => `definitions-evaluated/defs/${t}d${i}/def.yaml`,
    (i: number) => `files/${t}f${i}.txt`,
    (i: number) => `audit/${t}${i}.json`,
    (i: number) => `${t}notes-${i}.md`, // one segment: _root
  ];
  return Array.from({ length: count }, (_, i) => templates[i % templates.length](i));
}

/** A body for a seeded key: its name plus filler, so sizes differ between keys. */
export function bodyFor(rel: string, i: number): Buffer {
  return Buffer.from(`${rel}\n${'x'.repeat((i * 37) % 113)}`);
}

const ROOT_INTERNAL = [
  '.push-queue.json',
  '.datastore-sync-state.json',
  '_catalog.db',
  '_catalog.db-wal',
  '_catalog.db-shm',
  'x/.lock',
  'data/aws/_catalog.db',
  '_control/progress.json',
  '_index/tmp/upload.part',
];
// A namespace's own `.datastore.lock` is internal but not the root's lock, so it blocks nobody.
const NAMESPACE_INTERNAL = ['.push-queue.json', '_catalog.db', '_catalog.db-wal', '.datastore.lock', 'y/.lock', '_control/progress.json'];

/**
 * Seeds a swamp-like datastore (no index) and returns what each index should hold.
 *
 * @example
 * const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 12, internal: true, namespaces: ['ns1'] });
 * seeded.expectedEntries();      // the root's own index: no internal key, nothing under ns1/
 * seeded.expectedEntries('ns1'); // ns1's index, keys relative to ns1/
 */
export async function seedDatastore(store: S3Store, options: SeedOptions = {}): Promise<SeededDatastore> {
  const root: DatastoreRoot = { bucket: store.bucket, prefix: (options.prefix ?? '').replace(/^\/+|\/+$/g, '') };
  const scope = (namespace?: string): IndexScope => (namespace ? { root, namespace } : { root });
  const fullKey = (rel: string, namespace?: string): string => scopeBase(scope(namespace)) + rel;
  const scopeObjects = (tag: string): Map<string, Buffer> => {
    const spec = options.objects ?? 8;
    if (typeof spec === 'number') return new Map(swampKeys(spec, tag).map((k, i) => [k, bodyFor(k, i)]));
    return new Map(Object.entries(spec).map(([k, v]) => [k, Buffer.isBuffer(v) ? v : Buffer.from(v)]));
  };

  const objects = new Map<string, Map<string, Buffer>>([['', scopeObjects('')]]);
  for (const ns of options.namespaces ?? []) objects.set(ns, scopeObjects(ns));

  const writes: Record<string, string | Buffer> = {};
  const internalKeys: string[] = [];
  for (const [ns, scoped] of objects) for (const [rel, body] of scoped) writes[fullKey(rel, ns || undefined)] = body;
  for (const ns of options.namespaces ?? []) {
    const marker = fullKey('.namespace.json', ns);
    writes[marker] = JSON.stringify(namespaceMarker(ns));
    internalKeys.push(marker);
  }
  if (options.internal) {
    for (const rel of ROOT_INTERNAL) internalKeys.push(fullKey(rel));
    for (const ns of options.namespaces ?? []) for (const rel of NAMESPACE_INTERNAL) internalKeys.push(fullKey(rel, ns));
  }
  for (const key of internalKeys) writes[key] ??= `internal ${key}`;
  await putObjects(store, writes);

  const expected = new Map<string, KeySize[]>();
  for (const [ns, scoped] of objects) expected.set(ns, sortByKey([...scoped].map(([key, body]) => ({ key, size: body.length }))));

  return {
    store,
    root,
    objects,
    expected,
    internalKeys,
    scope,
    indexKey: (namespace) => fullKey(INDEX_KEY, namespace),
    fullKey,
    expectedEntries: (namespace) => [...(expected.get(namespace ?? '') ?? [])],
  };
}

// ---------------------------------------------------------------------------------------------
// Shard-first layout
// ---------------------------------------------------------------------------------------------

/**
 * Writes a shard-first layout under `base` (empty or ending in `/`) as a migrated client would: one
 * `_index/<partition>.json` per partition of `entries` (keys without a partition are skipped), and
 * `_index/_meta.json` when `meta` is given (leave it out to test a root whose manifest is missing).
 */
export async function putShardLayout(store: S3Store, base: string, entries: Iterable<IndexEntry>, meta?: ShardMeta): Promise<void> {
  const grouped = new Map<string, IndexEntry[]>();
  for (const entry of entries) {
    const partition = partitionOf(entry.key);
    if (partition !== undefined) grouped.set(partition, [...(grouped.get(partition) ?? []), entry]);
  }
  const writes: Record<string, string> = {};
  for (const [partition, list] of grouped) writes[`${base}${SHARD_DIR}${partition}.json`] = shardJson(list);
  if (meta) writes[`${base}${SHARD_META_KEY}`] = JSON.stringify(meta);
  await putObjects(store, writes);
}

/** `{key, size}` of each listed shard under `base`, by partition (an absent shard gives `[]`). */
export async function readShardSummaries(store: S3Store, base: string, partitions: Iterable<string>): Promise<Map<string, KeySize[]>> {
  const shards = new Map<string, KeySize[]>();
  for (const partition of partitions) shards.set(partition, summarize(await readIndex(store, `${base}${SHARD_DIR}${partition}.json`)));
  return shards;
}

/** Groups `{key, size}` rows by shard partition as a correct shard-first index would hold them; unshardable keys are left out. */
export function groupSummaries(rows: Iterable<KeySize>): Map<string, KeySize[]> {
  const grouped = new Map<string, KeySize[]>();
  for (const row of rows) {
    const partition = partitionOf(row.key);
    if (partition !== undefined) grouped.set(partition, [...(grouped.get(partition) ?? []), row]);
  }
  for (const [p, list] of grouped) grouped.set(p, sortByKey(list));
  return grouped;
}

// ---------------------------------------------------------------------------------------------
// Watching and bending requests
// ---------------------------------------------------------------------------------------------

/** One request as a store sent it (retries are not repeated here; see `store.requests` for those). */
export interface LoggedRequest {
  readonly op: string;
  readonly key?: string;
  readonly ifMatch?: string;
  readonly ifNoneMatch?: string;
}

/** Records, in order, every command the store's client sends from now on. */
export function trackRequests(store: S3Store): LoggedRequest[] {
  const log: LoggedRequest[] = [];
  store.client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { Key?: string; IfMatch?: string; IfNoneMatch?: string };
      log.push({
        op: (context.commandName ?? 'Unknown').replace(/Command$/, ''),
        key: input.Key,
        ifMatch: input.IfMatch,
        ifNoneMatch: input.IfNoneMatch,
      });
      return next(args);
    },
    { step: 'initialize', name: 'testRequestLog', override: true },
  );
  // Listing pages, object streams and HEADs may bypass the SDK's middleware (the store's direct path).
  store.observe((op, input) => void log.push({ op, key: input.Key }));
  return log;
}

/** Hooks a {@link hookedStore} runs before the real request; they may do anything to the bucket. */
export interface StoreHooks {
  beforePut?(key: string, conditional: boolean): Promise<void> | void;
  beforeGet?(key: string): Promise<void> | void;
}

/**
 * An `S3Store` on `bucket` that runs `hooks` before its requests: the seam for "someone else wrote
 * between our read and our write" races, made against the real bucket.
 */
export function hookedStore(bucket: string, hooks: StoreHooks): S3Store {
  class HookedStore extends S3Store {
    override async put(...args: Parameters<S3Store['put']>): ReturnType<S3Store['put']> {
      await hooks.beforePut?.(args[0], args[2] !== undefined);
      return super.put(...args);
    }

    override async get(...args: Parameters<S3Store['get']>): ReturnType<S3Store['get']> {
      await hooks.beforeGet?.(args[0]);
      return super.get(...args);
    }
  }
  return new HookedStore(testClient(), bucket);
}

/**
 * An `S3Store` on `bucket` that reads these object versions (by ETag) `ageMs` older than S3 says, in GETs,
 * HEADs and listings: writes made a moment before the others, which moto's whole-second LastModified
 * cannot show without waiting for the next second.
 */
export function agedStore(bucket: string, etags: ReadonlySet<string>, ageMs: number): S3Store {
  const older = <T extends { readonly etag: string; readonly lastModified: Date }>(object: T): T =>
    etags.has(unquoteEtag(object.etag)) ? { ...object, lastModified: new Date(object.lastModified.getTime() - ageMs) } : object;
  class AgedStore extends S3Store {
    override async get(...args: Parameters<S3Store['get']>): ReturnType<S3Store['get']> {
      const object = await super.get(...args);
      return object && older(object);
    }

    override async head(...args: Parameters<S3Store['head']>): ReturnType<S3Store['head']> {
      const info = await super.head(...args);
      return info && older(info);
    }

    override async *listPages(...args: Parameters<S3Store['listPages']>): ReturnType<S3Store['listPages']> {
      for await (const page of super.listPages(...args)) {
        const objects = page.objects.map((o) => {
          if (!etags.has(unquoteEtag(o.etag))) return o;
          return { ...o, lastModified: new Date(Date.parse(o.lastModified) - ageMs).toISOString() };
        });
        yield { ...page, objects };
      }
    }
  }
  return new AgedStore(testClient(), bucket);
}

/** An HTTP request as the fault injector sees it. */
export interface OutgoingRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, unknown>;
  readonly headers: Record<string, string>;
}

/** A canned HTTP answer; `code` becomes an S3 XML error body unless `body` is given. */
export interface CannedResponse {
  readonly status: number;
  readonly code?: string;
  readonly message?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

/**
 * A client whose requests first meet `fault`: return a response to answer instead of S3, or
 * undefined to let the request through to the test endpoint. Everything else (retries, error
 * parsing) is the library's real client from `createS3Client`.
 *
 * @example
 * let n = 0;
 * const store = new S3Store(faultyClient(() => (n++ === 0 ? { status: 503, code: 'SlowDown' } : undefined)), bucket);
 */
export function faultyClient(
  fault: (request: OutgoingRequest) => CannedResponse | undefined,
  overrides: Partial<S3ClientConfig> = {},
): S3Client {
  const real = testClient();
  type Handler = { handle(request: unknown, options?: unknown): Promise<{ response: unknown }>; destroy?(): void };
  const inner = real.config.requestHandler as unknown as Handler;
  const handler: Handler = {
    async handle(request, options) {
      const r = request as { method: string; path: string; query?: Record<string, unknown>; headers: Record<string, string> };
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(r.headers)) headers[k.toLowerCase()] = v;
      const canned = fault({ method: r.method, path: r.path, query: r.query ?? {}, headers });
      if (!canned) return inner.handle(request, options);
      const body =
        canned.body ??
        (canned.code
          ? `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${canned.code}</Code><Message>${canned.message ?? canned.code}</Message><RequestId>FAULT</RequestId></Error>`
          : '');
      return {
        response: {
          statusCode: canned.status,
          reason: canned.code,
          headers: { 'content-type': 'application/xml', 'x-amz-request-id': 'FAULT', ...canned.headers },
          body: Readable.from([Buffer.from(body)]),
        },
      };
    },
    destroy: () => inner.destroy?.(),
  };
  return testClient({ ...overrides, requestHandler: handler as unknown as S3ClientConfig['requestHandler'] });
}
