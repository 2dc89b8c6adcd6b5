/** The bad-input corpus (cases.ts): every row's expected answer asserted, none losing data. */
import { execFileSync } from 'node:child_process';
// The module object itself (not an import wrapper), so a spy on it is what the library calls.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const fs = require('node:fs') as typeof import('node:fs');
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig } from '../../lambda/handler/config';
import { hydrateLine } from '../../bin/cli/format';
import { ConfigError } from '../../lambda/lib/errors';
import type { S3Store } from '../../lambda/lib/s3';
import { healAndHydrate } from '../../lambda/lib/hydrate';
import { isInternalKey, partitionOf, refusedKeyReason } from '../../lambda/lib/keys';
import { parseDatastoreConfig } from '../../lambda/lib/config';
import { parseIndex } from '../../lambda/lib/index-file';
import { parseNotification, placeChange } from '../../lambda/lib/notifications';
import { datastoreConfig, ensureBuiltCli, readTree, runCli, tempDir } from '../cli/helpers';
import { deepRoot } from '../helpers/deep';
import { indexEntry } from '../helpers/factories';
import { type LoopbackProxy, startLoopbackProxy } from '../helpers/proxy';
import { connectStore, listKeys, putIndex, putObject, putObjects, readIndex, readObject, testEndpoint, testStore } from '../helpers/s3';
import { BUCKET_SCENARIOS, type BucketScenario, bucketScenario } from './bucket-scenarios';
import { type CacheScenario, cacheScenario } from './cache-scenarios';
import { CASES, type ConfigCase, type EventCase, HUGE_INDEX, type IndexCase, type KeyCase, type RunCase } from './cases';

const of = <K extends string>(kind: K) => CASES.filter((c) => c.kind === kind);

test('the corpus holds at least 40 cases, each named once', () => {
  expect(CASES.length).toBeGreaterThanOrEqual(40);
  expect(new Set(CASES.map((c) => c.name)).size).toBe(CASES.length);
});

describe('index files', () => {
  it.each((of('index') as IndexCase[]).map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const parsed = parseIndex(c.body());
    expect(parsed.ok).toBe(c.expect.ok);
    if (parsed.ok && c.expect.ok && c.name !== HUGE_INDEX) expect(parsed.index.entries.size).toBe(c.expect.entries);
    if (parsed.ok && c.name === HUGE_INDEX) expect(parsed.index.entries.size).toBeGreaterThan(300_000);
    if (!parsed.ok && !c.expect.ok) {
      expect(parsed.reason).toMatch(c.expect.reason);
      expect(parsed.reason).not.toMatch(/undefined/);
      if (c.expect.version !== undefined) expect(parsed.version).toBe(c.expect.version);
      if (c.expect.salvaged !== undefined) expect(parsed.salvaged?.entries.size ?? 0).toBe(c.expect.salvaged);
    }
  });
});

describe('keys', () => {
  it.each((of('key') as KeyCase[]).map((c) => [c.name, c] as const))('%s', (_name, c) => {
    expect(refusedKeyReason(c.key) !== undefined).toBe(c.expect.refused);
    if (c.expect.internal !== undefined) expect(isInternalKey(c.key)).toBe(c.expect.internal);
    if (c.expect.partition !== undefined) expect(partitionOf(c.key) ?? null).toBe(c.expect.partition);
  });
});

describe('events', () => {
  const roots = [{ bucket: 'datastore', prefix: 'swamp' }];
  it.each((of('event') as EventCase[]).map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const message = parseNotification(c.body());
    expect(message.kind).toBe(c.expect.kind);
    if (message.kind === 'unknown' && c.expect.kind === 'unknown') expect(message.reason).toMatch(c.expect.reason);
    if (message.kind === 'changes' && c.expect.kind === 'changes') {
      expect(message.changes).toHaveLength(c.expect.changes);
      expect(message.ignored).toBe(c.expect.ignored);
      if (c.expect.placed)
        expect(message.changes.map((ch) => placeChange(ch, 'datastore', roots).status)).toEqual(
          message.changes.map(() => c.expect.kind === 'changes' && c.expect.placed),
        );
      if (c.expect.firstKey) expect(message.changes[0].key).toBe(c.expect.firstKey);
      if (c.expect.firstSize !== undefined) expect(message.changes[0].size ?? null).toBe(c.expect.firstSize);
    }
  });
});

describe('configuration', () => {
  it.each((of('config') as ConfigCase[]).map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const run = () => (c.env ? parseConfig(c.env) : parseDatastoreConfig(c.config));
    if ('error' in c.expect) {
      expect(run).toThrow(ConfigError);
      expect(run).toThrow(c.expect.error);
    } else {
      expect(run).not.toThrow();
    }
  });
});

/** True when this process may mount a small tmpfs (root with CAP_SYS_ADMIN), for a real full disk. */
function mountTmpfs(dir: string, size: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Where no tmpfs can be mounted (CI without CAP_SYS_ADMIN): the same hydrate in-process with the disk
 * filling at the fs seam after the first file (a 0-byte temporary created, then ENOSPC), printed as the
 * command prints it.
 */
async function fullDiskAtTheSeam(store: S3Store, cacheDir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  let written = 0;
  const real = fs.createWriteStream;
  const spy = jest.spyOn(fs, 'createWriteStream').mockImplementation(((path: string, options?: unknown) => {
    if (written++ === 0) return real(path, options as never);
    const stream = real(path, options as never);
    stream.write = () => {
      process.nextTick(() =>
        stream.destroy(
          Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' }),
        ),
      );
      return false;
    };
    return stream;
  }) as typeof fs.createWriteStream);
  try {
    const result = await healAndHydrate(
      connectStore(store.bucket),
      { bucket: store.bucket, prefix: 'swamp' },
      { cacheDir, concurrency: 1 },
    );
    expect([...readTree(cacheDir).keys()].filter((n) => n.endsWith('.part'))).toEqual([]);
    return {
      code: result.hydrate.failed.length > 0 ? 1 : 0,
      stdout: hydrateLine(result),
      stderr: result.hydrate.failed.map((f) => `datastore-indexer: failed to pull ${JSON.stringify(f.key)}: ${f.error}`).join('\n'),
    };
  } finally {
    spy.mockRestore();
  }
}

/** A loopback proxy that answers 501 NotImplemented to every conditional write, like a store without them. */
function noConditionalWrites(): Promise<LoopbackProxy> {
  return startLoopbackProxy(testEndpoint(), (req, res) => {
    const conditional = req.headers['if-match'] !== undefined || req.headers['if-none-match'] !== undefined;
    if (!conditional || (req.method !== 'PUT' && req.method !== 'DELETE')) return false;
    req.resume();
    res.writeHead(501, { 'content-type': 'application/xml' });
    res.end(
      '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>',
    );
    return true;
  });
}

describe('runs of the command', () => {
  beforeAll(ensureBuiltCli);

  async function scenario(c: RunCase): Promise<{ code: number | null; stdout: string; stderr: string; after?: () => Promise<void> }> {
    const store = await testStore();
    const config = datastoreConfig(store.bucket, 'swamp');
    switch (c.scenario) {
      case 'cache-under-file': {
        const file = join(tempDir(), 'a-file');
        writeFileSync(file, 'x');
        return runCli(['hydrate', '--config', config, '--cache', join(file, 'cache')]);
      }
      case 'cache-under-proc':
        await putObject(store, 'swamp/logs/a.log', 'aaa');
        return runCli(['hydrate', '--config', config, '--cache', `/proc/datastore-indexer-corpus-${process.pid}/cache`]);
      case 'full-disk-hydrate': {
        const dir = join(tempDir(), 'small-disk');
        mkdirSync(dir);
        await putObjects(store, {
          'swamp/files/big-1.bin': Buffer.alloc(48 * 1024, 1),
          'swamp/files/big-2.bin': Buffer.alloc(48 * 1024, 2),
        });
        if (process.env.DATASTORE_INDEXER_TEST_NO_TMPFS || !mountTmpfs(dir, '64k')) return fullDiskAtTheSeam(store, join(dir, 'cache'));
        try {
          const run = await runCli(['hydrate', '--config', config, '--cache', join(dir, 'cache'), '--concurrency', '1']);
          // No temporary file left behind, and the file that fit is whole.
          expect([...readTree(join(dir, 'cache')).keys()].filter((n) => n.endsWith('.part'))).toEqual([]);
          const left = readdirSync(join(dir, 'cache', 'files'), { withFileTypes: false }) as string[];
          for (const name of left) expect(readFileSync(join(dir, 'cache', 'files', name)).length).toBe(48 * 1024);
          return run;
        } finally {
          execFileSync('umount', [dir]);
        }
      }
      case 'escape-in-check':
        await putIndex(store, 'swamp/.datastore-index.json', []);
        await putObject(store, 'swamp/logs/\u001b[31mred\u001b[0m.log', 'x');
        return runCli(['check', '--config', config]).then((run) => {
          expect(run.stdout).not.toContain('\u001b');
          return run;
        });
      case 'temp-named-key': {
        await putObjects(store, {
          'swamp/logs/a.log': 'the data',
          'swamp/logs/a.log.datastore-indexer.part': 'also data, not a temporary file',
        });
        const cache = tempDir();
        const run = await runCli(['hydrate', '--config', config, '--cache', cache]);
        expect(readFileSync(join(cache, 'logs', 'a.log'), 'utf8')).toBe('the data');
        expect(readFileSync(join(cache, 'logs', 'a.log.datastore-indexer.part'), 'utf8')).toBe('also data, not a temporary file');
        return run;
      }
      case 'no-conditional-writes': {
        await putObjects(store, { 'swamp/logs/a.log': 'aaa', 'swamp/logs/b.log': 'bb' });
        const proxy = await noConditionalWrites();
        try {
          const run = await runCli([
            'repair',
            '--config',
            JSON.stringify({ bucket: store.bucket, prefix: 'swamp', endpoint: proxy.endpoint, forcePathStyle: true }),
          ]);
          expect(run.stderr).toMatch(/does not implement conditional writes/);
          const index = await readIndex(store, 'swamp/.datastore-index.json');
          expect([...index!.entries.keys()].sort()).toEqual(['logs/a.log', 'logs/b.log']);
          expect(await readObject(store, 'swamp/.datastore.lock')).toBeUndefined();
          return run;
        } finally {
          await proxy.close();
        }
      }
      case 'refused-key-in-index': {
        await putObjects(store, { 'swamp/logs/a.log': 'aaa' });
        await putIndex(store, 'swamp/.datastore-index.json', [
          indexEntry('logs/a.log', { size: 3, sha256: 'kept' }),
          indexEntry('../escape', { size: 1 }),
        ]);
        const run = await runCli(['repair', '--config', config]);
        const index = await readIndex(store, 'swamp/.datastore-index.json');
        expect([...index!.entries.keys()]).toEqual(['logs/a.log']);
        expect(index!.entries.get('logs/a.log')!.sha256).toBe('kept');
        return run;
      }
      case 'unparseable-index-kept': {
        await putObjects(store, { 'swamp/logs/a.log': 'aaa', 'swamp/.datastore-index.json': '{"version":1,"entries":{"logs/a.log":' });
        const run = await runCli(['repair', '--config', config]);
        const kept = (await listKeys(store, 'swamp/_control/')).filter((k) => k.includes('datastore-index'));
        expect(kept.length).toBeGreaterThan(0);
        expect((await readObject(store, kept[0]))!.toString()).toBe('{"version":1,"entries":{"logs/a.log":');
        return run;
      }
      case 'deep-client-field-repair': {
        const { added } = await deepRoot(store, 'swamp', 5_000);
        const run = await runCli(['repair', '--config', config]);
        expect((await readIndex(store, 'swamp/.datastore-index.json'))!.entries.has(added)).toBe(true);
        return run;
      }
      case 'cr-key-listed': {
        const keys = ['files/cr\rkey.txt', 'files/cr\rdir/a.txt', 'files/a+b c.txt'];
        await putObjects(store, Object.fromEntries(keys.map((k) => [`swamp/${k}`, k])));
        const run = await runCli(['repair', '--config', config]);
        expect([...(await readIndex(store, 'swamp/.datastore-index.json'))!.entries.keys()].sort()).toEqual([...keys].sort());
        return run;
      }
      default:
        if ((BUCKET_SCENARIOS as readonly string[]).includes(c.scenario))
          return bucketScenario(c.scenario as BucketScenario, store, config);
        return cacheScenario(c.scenario as CacheScenario, store, config);
    }
  }

  it.each((of('run') as RunCase[]).map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const run = await scenario(c);
    expect({ code: run.code, stackTrace: /\n\s+at /.test(run.stderr) }).toEqual({ code: c.expect.code, stackTrace: false });
    if (c.expect.stderr) expect(run.stderr).toMatch(c.expect.stderr);
    if (c.expect.stdout) expect(run.stdout).toMatch(c.expect.stdout);
  });
});
