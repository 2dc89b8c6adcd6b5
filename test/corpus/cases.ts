/**
 * The bad-input corpus: every input a user, a client or S3 may hand the indexer that is not the happy path,
 * with the answer expected of it. `corpus.test.ts` asserts each row; a row names what it feeds and to what.
 */
import { indexWithDeepField } from '../helpers/deep';
import { indexEntry, s3Event, s3EventRecord } from '../helpers/factories';
import type { BucketScenario } from './bucket-scenarios';
import type { CacheScenario } from './cache-scenarios';

/** An index file fed to `parseIndex`: parses with `entries` entries, or is refused with a reason matching `reason`. */
export interface IndexCase {
  readonly kind: 'index';
  readonly name: string;
  readonly body: () => string;
  readonly expect:
    | { readonly ok: true; readonly entries: number }
    | {
        readonly ok: false;
        readonly reason: RegExp;
        /** The version a newer client's file says, which the indexer leaves as it is. */
        readonly version?: number;
        /** Sound entries kept (with their client fields) from a file mostly sound; 0: none kept. */
        readonly salvaged?: number;
      };
}

/** A relative key: refused by clients or not (`refusedKeyReason`), internal or not (`isInternalKey`). */
export interface KeyCase {
  readonly kind: 'key';
  readonly name: string;
  readonly key: string;
  readonly expect: { readonly refused: boolean; readonly internal?: boolean; readonly partition?: string | null };
}

/** An SQS message body fed to `parseNotification` (and its changes placed in bucket `datastore`, root `swamp`). */
export interface EventCase {
  readonly kind: 'event';
  readonly name: string;
  readonly body: () => string;
  readonly expect:
    | { readonly kind: 'unknown'; readonly reason: RegExp }
    | { readonly kind: 'test-event' }
    | {
        readonly kind: 'changes';
        readonly changes: number;
        readonly ignored: number;
        readonly placed?: string;
        readonly firstKey?: string;
        readonly firstSize?: number | null;
      };
}

/** Configuration: the handler's environment (`parseConfig`) or swamp's --config (`parseDatastoreConfig`); throws ConfigError matching `error`, or passes. */
export interface ConfigCase {
  readonly kind: 'config';
  readonly name: string;
  readonly env?: Record<string, string>;
  readonly config?: unknown;
  readonly expect: { readonly error: RegExp } | { readonly ok: true };
}

/** A run of the built command or a library call against moto; the test names the scenario, the row the answer. */
export interface RunCase {
  readonly kind: 'run';
  readonly name: string;
  readonly scenario:
    | 'cache-under-file'
    | 'cache-under-proc'
    | 'full-disk-hydrate'
    | 'escape-in-check'
    | 'temp-named-key'
    | 'no-conditional-writes'
    | 'refused-key-in-index'
    | 'unparseable-index-kept'
    | 'deep-client-field-repair'
    | 'cr-key-listed'
    | CacheScenario
    | BucketScenario;
  readonly expect: { readonly code: number; readonly stderr?: RegExp; readonly stdout?: RegExp };
}

export type CorpusCase = IndexCase | KeyCase | EventCase | ConfigCase | RunCase;

const entry = (key: string, size: unknown = 1, extra: object = {}) => ({ key, size, lastModified: '2026-05-04T15:20:00.000Z', ...extra });
const index = (entries: unknown, version: unknown = 1) => JSON.stringify({ version, lastPulled: '2026-05-04T15:24:03.000Z', entries });
const NFC = 'data/caf\u00e9/1/raw';
const NFD = 'data/cafe\u0301/1/raw';

/** A 100 MB index (about 400,000 entries with client fields), built on demand. */
function hugeIndex(): string {
  const parts: string[] = [];
  let bytes = 0;
  for (let i = 0; bytes < 100 * 1024 * 1024; i++) {
    const k = `data/aws/ec2/i-${i.toString(16).padStart(8, '0')}/1/raw`;
    const part = `${JSON.stringify(k)}:${JSON.stringify(entry(k, i, { localMtime: '2026-05-04T15:19:58.120Z', sha256: 'f'.repeat(64), note: 'x'.repeat(60) }))}`;
    parts.push(part);
    bytes += part.length + 1;
  }
  return `{"version":1,"lastPulled":"2026-05-04T15:24:03.000Z","entries":{${parts.join(',')}}}`;
}

/** How many entries `hugeIndex` holds (computed once by the test). */
export const HUGE_INDEX = 'a 100 MB index';

export const CASES: readonly CorpusCase[] = [
  // Index files
  { kind: 'index', name: 'not JSON', body: () => '{"version":1,"entries":{', expect: { ok: false, reason: /JSON/i } },
  { kind: 'index', name: 'an empty file', body: () => '', expect: { ok: false, reason: /JSON|empty/i } },
  { kind: 'index', name: 'JSON null', body: () => 'null', expect: { ok: false, reason: /object/i } },
  { kind: 'index', name: 'a JSON array', body: () => '[]', expect: { ok: false, reason: /object/i } },
  {
    kind: 'index',
    name: 'wrong version (2)',
    body: () => index({}, 2),
    expect: { ok: false, reason: /version 2, a format this indexer does not know/, version: 2 },
  },
  { kind: 'index', name: 'version as a string', body: () => index({}, '1'), expect: { ok: false, reason: /version/i } },
  { kind: 'index', name: 'entries as an array', body: () => index([entry('a')]), expect: { ok: false, reason: /entries/i } },
  { kind: 'index', name: 'entries missing', body: () => JSON.stringify({ version: 1 }), expect: { ok: false, reason: /entries/i } },
  { kind: 'index', name: 'a negative size', body: () => index({ 'logs/a': entry('logs/a', -1) }), expect: { ok: false, reason: /size/i } },
  // A whole number however large parses; a heal then corrects it from the listing (resized).
  { kind: 'index', name: 'a huge size (1e300)', body: () => index({ 'logs/a': entry('logs/a', 1e300) }), expect: { ok: true, entries: 1 } },
  {
    kind: 'index',
    name: 'a size as a string',
    body: () => index({ 'logs/a': entry('logs/a', '12') }),
    expect: { ok: false, reason: /size/i },
  },
  {
    kind: 'index',
    name: 'a fractional size',
    body: () => index({ 'logs/a': entry('logs/a', 1.5) }),
    expect: { ok: false, reason: /size/i },
  },
  {
    kind: 'index',
    name: 'an entry whose key differs from its name',
    body: () => index({ 'logs/a': entry('logs/b') }),
    expect: { ok: false, reason: /key/i },
  },
  {
    kind: 'index',
    name: 'an entry without a key',
    body: () => index({ 'logs/a': { size: 1, lastModified: '2026-05-04T15:20:00.000Z' } }),
    expect: { ok: false, reason: /key/i },
  },
  {
    kind: 'index',
    name: 'an entry that is not an object',
    body: () => index({ 'logs/a': 7 }),
    expect: { ok: false, reason: /entry|object/i },
  },
  {
    kind: 'index',
    name: 'unknown fields everywhere (kept)',
    body: () => JSON.stringify({ version: 1, extra: true, entries: { 'logs/a': entry('logs/a', 3, { sha256: 'ab', future: { x: 1 } }) } }),
    expect: { ok: true, entries: 1 },
  },
  // Read as unreadable: a heal keeps a copy under _control/ and rebuilds from the listing.
  {
    kind: 'index',
    name: 'a UTF-8 byte order mark',
    body: () => `\ufeff${index({ 'logs/a': entry('logs/a') })}`,
    expect: { ok: false, reason: /JSON/i },
  },
  { kind: 'index', name: HUGE_INDEX, body: hugeIndex, expect: { ok: true, entries: -1 } },

  // Keys
  { kind: 'key', name: 'a ".." segment', key: 'data/../../etc/passwd', expect: { refused: true } },
  { kind: 'key', name: 'an absolute key', key: '/etc/passwd', expect: { refused: true } },
  { kind: 'key', name: 'a backslash path with ..', key: 'data\\..\\..\\secret', expect: { refused: true } },
  { kind: 'key', name: 'a NUL', key: 'logs/a\u0000b', expect: { refused: true } },
  { kind: 'key', name: 'a 1,024-byte segment', key: `logs/${'k'.repeat(1024)}`, expect: { refused: true } },
  {
    kind: 'key',
    name: 'a 1,024-byte key of short segments',
    key: `files/${Array.from({ length: 8 }, () => 'k'.repeat(120)).join('/')}`.padEnd(1024, 'z'),
    expect: { refused: false, partition: 'files' },
  },
  { kind: 'key', name: 'NFC form', key: NFC, expect: { refused: false, partition: 'data--caf\u00e9--1' } },
  { kind: 'key', name: 'NFD form of the same name (another key)', key: NFD, expect: { refused: false, partition: 'data--cafe\u0301--1' } },
  { kind: 'key', name: 'a +', key: 'files/a+b.txt', expect: { refused: false, partition: 'files' } },
  { kind: 'key', name: 'a %', key: 'files/100%25 done.txt', expect: { refused: false, partition: 'files' } },
  { kind: 'key', name: 'spaces', key: 'logs/my log file.log', expect: { refused: false, partition: 'logs' } },
  { kind: 'key', name: 'a trailing /', key: 'data/folder/', expect: { refused: true } },
  { kind: 'key', name: 'an empty segment', key: 'logs//a.log', expect: { refused: true } },
  { kind: 'key', name: 'terminal escape sequences', key: 'logs/\u001b[31mred\u001b[0m.log', expect: { refused: false, partition: 'logs' } },
  { kind: 'key', name: 'the index itself', key: '.datastore-index.json', expect: { refused: false, internal: true } },
  { kind: 'key', name: 'under _control/', key: '_control/datastore-indexer/x.json', expect: { refused: false, internal: true } },
  { kind: 'key', name: 'a _catalog.db- file', key: 'data/x/_catalog.db-wal', expect: { refused: false, internal: true } },
  {
    kind: 'key',
    name: 'named like the hydrate temporary file',
    key: 'logs/a.log.datastore-indexer.part',
    expect: { refused: false, internal: false, partition: 'logs' },
  },

  // Events
  { kind: 'event', name: 'no Records', body: () => JSON.stringify({ hello: 'world' }), expect: { kind: 'unknown', reason: /neither/ } },
  {
    kind: 'event',
    name: "S3's test event",
    body: () => JSON.stringify({ Service: 'Amazon S3', Event: 's3:TestEvent', Bucket: 'datastore' }),
    expect: { kind: 'test-event' },
  },
  {
    kind: 'event',
    name: 'a foreign bucket',
    body: () => JSON.stringify(s3Event([s3EventRecord({ bucket: 'someone-else', key: 'swamp/logs/a.log' })])),
    expect: { kind: 'changes', changes: 1, ignored: 0, placed: 'foreign-bucket' },
  },
  {
    kind: 'event',
    name: 'a missing size',
    body: () => {
      const e = s3Event([s3EventRecord({ bucket: 'datastore', key: 'swamp/logs/a.log' })]);
      delete (e.Records[0].s3.object as { size?: number }).size;
      return JSON.stringify(e);
    },
    expect: { kind: 'changes', changes: 1, ignored: 0, placed: 'root', firstSize: null },
  },
  {
    kind: 'event',
    name: 'an unknown EventBridge detail-type',
    body: () =>
      JSON.stringify({
        source: 'aws.s3',
        'detail-type': 'Object Restore Completed',
        detail: { bucket: { name: 'datastore' }, object: { key: 'swamp/logs/a.log' } },
      }),
    expect: { kind: 'changes', changes: 0, ignored: 1 },
  },
  { kind: 'event', name: 'an SQS body that is not JSON', body: () => 'this is not json', expect: { kind: 'unknown', reason: /not JSON/ } },
  {
    kind: 'event',
    name: 'Records that is not an array',
    body: () => JSON.stringify({ Records: { 0: {} } }),
    expect: { kind: 'unknown', reason: /neither/ },
  },
  {
    kind: 'event',
    name: 'a 256 KB body',
    body: () =>
      JSON.stringify(
        s3Event(
          Array.from({ length: 330 }, (_, i) =>
            s3EventRecord({ bucket: 'datastore', key: `swamp/logs/${'n'.repeat(300)}-${i}.log`, size: i + 1 }),
          ),
        ),
      ),
    expect: { kind: 'changes', changes: 330, ignored: 0, placed: 'root' },
  },
  {
    kind: 'event',
    name: 'a key with a space (arrives as +)',
    body: () => JSON.stringify(s3Event([s3EventRecord({ bucket: 'datastore', key: 'swamp/logs/my file+x%.log', size: 5 })])),
    expect: { kind: 'changes', changes: 1, ignored: 0, placed: 'root', firstKey: 'swamp/logs/my file+x%.log', firstSize: 5 },
  },
  {
    kind: 'event',
    name: 'a record that is not an object',
    body: () => JSON.stringify({ Records: ['x'] }),
    expect: { kind: 'changes', changes: 0, ignored: 1 },
  },

  // Configuration
  { kind: 'config', name: 'a bucket name with a space', env: { DATASTORE_BUCKET: 'my bucket' }, expect: { error: /not a bucket name/ } },
  { kind: 'config', name: 'a bucket given as s3://', env: { DATASTORE_BUCKET: 's3://b/swamp' }, expect: { error: /not a bucket name/ } },
  {
    kind: 'config',
    name: 'a bad endpoint URL (handler)',
    env: { DATASTORE_BUCKET: 'b', AWS_ENDPOINT_URL_S3: 'localhost:9000' },
    expect: { error: /AWS_ENDPOINT_URL_S3/ },
  },
  {
    kind: 'config',
    name: 'a bad endpoint URL (--config)',
    config: { bucket: 'b', endpoint: 'ftp://minio:9000' },
    expect: { error: /endpoint/ },
  },
  {
    kind: 'config',
    name: 'an unknown --config key',
    config: { bucket: 'b', prefx: 'swamp' },
    expect: { error: /Unknown datastore config key "prefx"/ },
  },
  { kind: 'config', name: 'a prefix with ..', config: { bucket: 'b', prefix: 'swamp/../x' }, expect: { error: /prefix/ } },
  {
    kind: 'config',
    name: 'a wildcard in DATASTORE_PREFIXES',
    env: { DATASTORE_BUCKET: 'b', DATASTORE_PREFIXES: 'swamp*' },
    expect: { error: /wildcard/ },
  },
  {
    kind: 'config',
    name: 'a good --config',
    config: { bucket: 'b', prefix: 'swamp', forcePathStyle: true, endpoint: 'http://127.0.0.1:9' },
    expect: { ok: true },
  },

  // Runs of the command (and the library) against moto
  { kind: 'run', name: '--cache under a file', scenario: 'cache-under-file', expect: { code: 1, stderr: /--cache.*file, not a folder/ } },
  {
    kind: 'run',
    name: '--cache under /proc',
    scenario: 'cache-under-proc',
    expect: { code: 1, stderr: /Cannot make the cache folder \/proc\/.*ENOENT/ },
  },
  {
    kind: 'run',
    name: 'a full disk during hydrate',
    scenario: 'full-disk-hydrate',
    expect: { code: 1, stderr: /Cannot write .*: no space left on device/, stdout: /Failed to pull/ },
  },
  {
    kind: 'run',
    name: 'terminal escape sequences in keys (check)',
    scenario: 'escape-in-check',
    expect: { code: 2, stdout: /missing {2}"logs\/\\u001b\[31mred\\u001b\[0m\.log"/ },
  },
  {
    kind: 'run',
    name: "a data key named like the command's temporary file",
    scenario: 'temp-named-key',
    expect: { code: 0, stdout: /Pulled 2 files/ },
  },
  { kind: 'run', name: 'a store answering 501 on If-Match', scenario: 'no-conditional-writes', expect: { code: 0 } },
  { kind: 'run', name: 'an index holding a key clients refuse', scenario: 'refused-key-in-index', expect: { code: 0, stdout: /refused/ } },
  {
    kind: 'run',
    name: 'an unparseable index (a copy kept)',
    scenario: 'unparseable-index-kept',
    expect: { code: 0, stdout: /copy kept at s3:\/\/.*_control\// },
  },
  // Issue 20: odd caches, endpoints and prefixes
  { kind: 'run', name: 'an empty --cache', scenario: 'empty-cache', expect: { code: 1, stderr: /--cache.*empty/ } },
  {
    kind: 'config',
    name: 'an endpoint with a path',
    config: { bucket: 'b', endpoint: 'http://127.0.0.1:9000/some/path' },
    expect: { error: /must not hold a path, got "\/some\/path"/ },
  },
  {
    kind: 'run',
    name: 'symbolic links in the cache to a folder and a file outside it',
    scenario: 'cache-links-out',
    expect: {
      code: 1,
      stderr:
        /cache\/logs\/a\.log is a symbolic link[^\n]*Remove it, then run again\n[^\n]*cache\/workflow-runs is a symbolic link[^\n]*Remove it/,
    },
  },
  { kind: 'run', name: 'two hydrates into one cache at once', scenario: 'concurrent-hydrates', expect: { code: 0, stdout: /Pulled/ } },
  {
    kind: 'run',
    name: "a same-size overwrite and a delete (as fresh as swamp's pull)",
    scenario: 'freshness-as-swamp-pull',
    expect: { code: 0, stdout: /Pulled 0 files \(0 B\), 1 already present/ },
  },
  {
    kind: 'run',
    name: 'a mistyped prefix (check and repair agree)',
    scenario: 'mistyped-prefix-advice',
    expect: { code: 1, stdout: /holds no object at all\. Check the bucket and --prefix/ },
  },
  {
    kind: 'run',
    name: 'a read-only cache',
    scenario: 'unwritable-cache',
    expect: { code: 1, stderr: /^datastore-indexer: [^\n]* cannot be written[^\n]*\n$/ },
  },
  {
    kind: 'run',
    name: 'keys a and a/b in one root',
    scenario: 'file-folder-collision',
    expect: { code: 1, stderr: /"logs\/a": it collides with key "logs\/a\/b"/ },
  },
  // Issue 20: client fields nested deeper than JSON.stringify recurses are kept, and do not stop a repair.
  {
    kind: 'index',
    name: 'a client field 5,000 levels deep (kept)',
    body: () => indexWithDeepField([indexEntry('logs/a'), indexEntry('logs/b')], 'logs/a', 5_000),
    expect: { ok: true, entries: 2 },
  },
  {
    kind: 'index',
    name: 'a client field 200,000 levels deep (kept)',
    body: () => indexWithDeepField([indexEntry('logs/a')], 'logs/a', 200_000),
    expect: { ok: true, entries: 1 },
  },
  {
    kind: 'run',
    name: 'repair of an index holding a 5,000-deep client field',
    scenario: 'deep-client-field-repair',
    expect: { code: 0, stdout: /Healed .*: \+1 added/ },
  },
  // Issue 20: clients accept a key holding a CR; listed with encoding-type=url it is indexed as itself.
  { kind: 'key', name: 'a carriage return', key: 'files/cr\rkey.txt', expect: { refused: false, partition: 'files' } },
  { kind: 'run', name: 'a key holding a carriage return (repair)', scenario: 'cr-key-listed', expect: { code: 0, stdout: /\+3 added/ } },

  // Issue 34: what real buckets hold
  {
    kind: 'run',
    name: 'hydrate of 40 objects, 2 of them archived',
    scenario: 'archived-objects',
    expect: {
      code: 1,
      stderr:
        /archived: "files\/old-a\.bin" is in GLACIER[^\n]*\n[^\n]*archived: "files\/old-b\.bin" is in DEEP_ARCHIVE[^\n]*\n[^\n]*restore-object --bucket \S+ --key 'swamp\/files\/old-a\.bin'[^\n]*and likewise for the 1 other/,
      stdout: /Pulled 38 files .* Left 2 archived files in S3 \(restore them, then run again\)\./,
    },
  },
  {
    kind: 'run',
    name: 'hydrate of an archived object whose restore is under way',
    scenario: 'archived-restoring',
    expect: {
      code: 1,
      stderr: /archived: "files\/cold\.bin" is in GLACIER, its restore under way/,
      stdout: /"archived": \[\s*\{\s*"key": "files\/cold\.bin",\s*"storageClass": "GLACIER",\s*"restoring": true/,
    },
  },
  {
    kind: 'index',
    name: "a newer client's index (version 99)",
    body: () => index({ 'logs/a': entry('logs/a') }, 99),
    expect: { ok: false, reason: /version 99, a format this indexer does not know \(it knows 1\)/, version: 99 },
  },
  {
    kind: 'index',
    name: 'no version at all',
    body: () => JSON.stringify({ entries: {} }),
    expect: { ok: false, reason: /^no "version" \(clients write 1\)$/ },
  },
  {
    kind: 'index',
    name: '30 entries with client fields, one malformed (29 salvaged)',
    body: () =>
      index({
        ...Object.fromEntries(
          Array.from({ length: 29 }, (_, i) => [
            `logs/${i}`,
            entry(`logs/${i}`, i, { sha256: `s${i}`, localMtime: '2026-05-04T15:19:58.120Z' }),
          ]),
        ),
        'logs/bad': entry('logs/bad', '12'),
      }),
    expect: { ok: false, reason: /entry "logs\/bad" has no valid size/, salvaged: 29 },
  },
  {
    kind: 'index',
    name: 'entries mostly malformed (none salvaged)',
    body: () => index({ 'logs/a': entry('logs/a'), 'logs/b': entry('logs/b', -1), 'logs/c': 7 }),
    expect: { ok: false, reason: /entry "logs\/b" has no valid size \(and 1 more bad entries\)/, salvaged: 0 },
  },
  {
    kind: 'run',
    name: 'repair of an index holding one malformed entry among 30',
    scenario: 'one-malformed-entry-repair',
    expect: {
      code: 0,
      stdout: /index was unreadable: entry "logs\/07\.log" has no valid size; copy kept at s3:\/\/.*_control\/.*\+1 added/,
    },
  },
  {
    kind: 'run',
    name: 'repair of a shard-first partition file holding one malformed entry among 30',
    scenario: 'one-malformed-shard-entry-repair',
    expect: { code: 0, stdout: /was unreadable: shard logs: entry "logs\/07\.log" has no valid size; copy kept at s3:\/\/.*_control\// },
  },
  {
    kind: 'run',
    name: 'repair of a version-99 index (left as it is)',
    scenario: 'newer-index-repair',
    expect: {
      code: 2,
      stdout: /Left .* as it is: swamp\/\.datastore-index\.json says index version 99[^\n]*a newer datastore-indexer is needed/,
    },
  },
  {
    kind: 'run',
    name: 'check of a version-99 index',
    scenario: 'newer-index-check',
    expect: { code: 2, stdout: /left as it is \(swamp\/\.datastore-index\.json says index version 99/ },
  },
  {
    kind: 'run',
    name: 'repair of a shard-first scope whose partition file is version 99',
    scenario: 'newer-shard-repair',
    expect: { code: 2, stdout: /Left .* as it is: swamp\/_index\/logs\.json says index version 99/ },
  },
  {
    kind: 'run',
    name: 'a manifest of version 3 (clients read the monolith)',
    scenario: 'unknown-manifest-version',
    expect: { code: 0, stdout: /Healed .*: \+1 added/ },
  },
  {
    kind: 'run',
    name: 'an endpoint answering 404 with a web page',
    scenario: 'html-404-endpoint',
    expect: {
      code: 1,
      stderr:
        /^datastore-indexer: The endpoint http:\/\/127\.0\.0\.1:\d+\/\S+ answered ListObjectsV2 with status 404 and a page that is not an S3 listing[^\n]*Check --endpoint/,
    },
  },
  {
    kind: 'run',
    name: 'a key ending in / that holds bytes (refused, not a folder marker)',
    scenario: 'folder-key-with-bytes',
    expect: { code: 2, stdout: /1 missing, 0 stale, 0 resized; 1 refused\n[\s\S]*refused {2}data\/x\// },
  },
  {
    kind: 'run',
    name: 'an NFD prefix whose keys are NFC',
    scenario: 'nfd-prefix',
    expect: { code: 1, stdout: /s3:\/\/\S+\/caf\u00e9\/ holds objects: the same name in Unicode normalisation NFC/ },
  },
  {
    kind: 'config',
    name: 'a prefix with a leading space',
    config: { bucket: 'b', prefix: ' swamp' },
    expect: { error: /starts with a space/ },
  },
  {
    kind: 'config',
    name: 'a prefix with a trailing space',
    config: { bucket: 'b', prefix: 'swamp/ ' },
    expect: { error: /ends with a space/ },
  },
];
