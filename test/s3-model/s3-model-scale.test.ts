/**
 * What the benchmark needs from the S3 model beyond answering like S3:
 * seeding in seconds, a fixed latency per request that overlaps across
 * concurrent requests (so parallel listing pays off as on real S3), and
 * request counts.
 */
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startS3Model, type S3Model } from '../../support/s3-model/server';

const LATENCY_MS = 30;
const SEEDED = 100_000;

let model: S3Model;
let s3: S3Client;

beforeAll(async () => {
  model = await startS3Model({ latencyMs: LATENCY_MS });
  s3 = new S3Client({
    endpoint: model.endpoint,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { accessKeyId: 'any', secretAccessKey: 'any' },
    maxAttempts: 1,
  });
});

const childTemps: string[] = [];

afterAll(async () => {
  s3?.destroy();
  await model?.stop();
  for (const dir of childTemps) rmSync(dir, { recursive: true, force: true });
});

/**
 * The same walk over plain HTTP. The SDK's XML parsing of a full page costs
 * more CPU than the latency this test is about; a regex over the XML costs
 * next to nothing.
 */
async function listAllRaw(endpoint: string, bucket: string, prefix = ''): Promise<{ keys: string[]; pages: number }> {
  const keys: string[] = [];
  let pages = 0;
  let token: string | undefined;
  do {
    const query = new URLSearchParams({ 'list-type': '2', prefix });
    if (token) query.set('continuation-token', token);
    const response = await fetch(`${endpoint}/${bucket}?${query.toString().replace(/\+/g, '%20')}`);
    expect(response.status).toBe(200);
    const xml = await response.text();
    pages++;
    for (const m of xml.matchAll(/<Key>([^<]*)<\/Key>/g)) keys.push(m[1]);
    token = /<NextContinuationToken>([^<]*)</.exec(xml)?.[1];
  } while (token);
  return { keys, pages };
}

/** Starts the CLI as its own process, so its CPU does not compete with the client's in this one. */
async function startCli(args: string[]): Promise<{ child: ChildProcess; endpoint: string; stderr: () => string }> {
  const tsx = join(__dirname, '..', '..', 'node_modules', '.bin', 'tsx');
  const cli = join(__dirname, '..', '..', 'support', 's3-model', 'cli.ts');
  // tsx keeps a folder in the temporary directory: give it one this file removes.
  const tmp = mkdtempSync(join(tmpdir(), 'indexer-model-cli-'));
  childTemps.push(tmp);
  const child = spawn(tsx, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: tmp } });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const endpoint = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes('\n')) resolve(stdout.split('\n')[0]);
    });
    child.once('exit', (code) => reject(new Error(`cli exited (${code}) before printing its endpoint: ${stderr}`)));
  });
  return { child, endpoint, stderr: () => stderr };
}

describe('S3 model at scale', () => {
  it('seeds 100,000 swamp-shaped objects (the time it took is printed, and measured by npm run bench)', () => {
    const cpu0 = process.cpuUsage();
    const result = model.seed('scale', { count: SEEDED });
    const cpu = process.cpuUsage(cpu0);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    console.log(
      `seeded ${result.count} objects (${(result.totalBytes / 1e6).toFixed(0)} MB of synthetic bodies) ` +
        `in ${result.elapsedMs.toFixed(0)} ms (${cpuMs.toFixed(0)} ms of CPU)`,
    );
    expect(result.count).toBe(SEEDED);
  });

  it("spreads each model folder's ids over the whole hex range, whatever its objects' versions", async () => {
    // Seeded by the test above: ec2 objects have up to three versions each.
    const { keys } = await listAllRaw(model.endpoint, 'scale', 'data/aws/ec2/');
    const leading = new Set(keys.map((key) => key.slice('data/aws/ec2/ec2-'.length)[0]));
    expect(keys.length).toBeGreaterThan(1000);
    expect([...leading].sort().join('')).toBe('0123456789abcdef');
  });

  it('lists 100,000 keys with 16 concurrent prefix listings as one sequential listing does (both timed and printed)', async () => {
    // The flat layout splits evenly under obj/0 ... obj/f: 16 prefixes, 16 workers.
    const { child, endpoint, stderr } = await startCli([
      '--port',
      '0',
      '--latency-ms',
      String(LATENCY_MS),
      '--seed',
      String(SEEDED),
      '--layout',
      'flat',
      '--bucket',
      'flat',
    ]);
    try {
      expect(endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const t0 = performance.now();
      const sequential = await listAllRaw(endpoint, 'flat');
      const sequentialMs = performance.now() - t0;
      expect(sequential.keys).toHaveLength(SEEDED);

      const t1 = performance.now();
      const parts = await Promise.all([...'0123456789abcdef'].map((hex) => listAllRaw(endpoint, 'flat', `obj/${hex}`)));
      const parallelMs = performance.now() - t1;
      const pages = parts.reduce((n, p) => n + p.pages, 0);
      console.log(
        `listing ${SEEDED} keys at ${LATENCY_MS} ms per request: sequential ${sequential.pages} pages in ` +
          `${sequentialMs.toFixed(0)} ms; 16 concurrent prefix listings, ${pages} pages in ` +
          `${parallelMs.toFixed(0)} ms (${(sequentialMs / parallelMs).toFixed(1)}x)\n${stderr().trim()}`,
      );
      // The same keys, each once, in the same order.
      expect(parts.flatMap((p) => p.keys)).toEqual(sequential.keys);
    } finally {
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      // The CLI reports its request counts on the way out and exits cleanly.
      expect(await exited).toBe(0);
      expect(stderr()).toMatch(/requests \{"ListObjectsV2":\d+/);
    }
  });

  it('serves a seeded object with a body of its listed size whose MD5 is its ETag', async () => {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: 'scale', Prefix: 'data/', MaxKeys: 3 }));
    expect(page.Contents).toHaveLength(3);
    for (const item of page.Contents ?? []) {
      const got = await s3.send(new GetObjectCommand({ Bucket: 'scale', Key: item.Key }));
      const body = Buffer.from(await (got.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
      expect(body.length).toBe(item.Size);
      expect(`"${createHash('md5').update(body).digest('hex')}"`).toBe(item.ETag);
      expect(got.ETag).toBe(item.ETag);
      expect(got.LastModified).toEqual(item.LastModified);
    }
  });

  it('waits the latency on every request, concurrently rather than in turn', async () => {
    // Told by how many requests the model holds at once, not by the clock: a
    // busy machine stretches time, not that count.
    const slow = await startS3Model({ latencyMs: 1000 });
    try {
      const head = async (): Promise<void> => {
        const res = await fetch(`${slow.endpoint}/nobucket-here`, { method: 'HEAD' });
        expect(res.status).toBe(404);
      };
      const t0 = performance.now();
      await head();
      const single = performance.now() - t0;
      expect(single).toBeGreaterThanOrEqual(999);
      expect(slow.peakWaiting()).toBe(1);
      // In turn, each would wait alone; at once, all 32 wait together (a second is long enough for all to arrive).
      await Promise.all(Array.from({ length: 32 }, head));
      expect(slow.peakWaiting()).toBe(32);
      expect(slow.requestCounts().HeadBucket).toBe(33);
    } finally {
      await slow.stop();
    }
  });

  it('counts requests by operation until reset', async () => {
    model.resetCounts();
    expect(Object.values(model.requestCounts()).every((n) => n === 0)).toBe(true);
    await s3.send(new PutObjectCommand({ Bucket: 'scale', Key: 'counted', Body: 'x' }));
    await s3.send(new HeadObjectCommand({ Bucket: 'scale', Key: 'counted' }));
    await s3.send(new GetObjectCommand({ Bucket: 'scale', Key: 'counted' }));
    await s3.send(new ListObjectsV2Command({ Bucket: 'scale', Prefix: 'counted' }));
    await s3.send(new DeleteObjectCommand({ Bucket: 'scale', Key: 'counted' }));
    await expect(s3.send(new HeadObjectCommand({ Bucket: 'scale', Key: 'counted' }))).rejects.toThrow();
    await expect(s3.send(new HeadBucketCommand({ Bucket: 'no-such-bucket' }))).rejects.toThrow();
    expect(model.requestCounts()).toEqual({
      ListObjectsV2: 1,
      GetObject: 1,
      HeadObject: 2,
      PutObject: 1,
      DeleteObject: 1,
      CreateBucket: 0,
      HeadBucket: 1,
      DeleteBucket: 0,
      Unsupported: 0,
    });
    model.resetCounts();
    expect(model.requestCounts().HeadObject).toBe(0);
  });
});
