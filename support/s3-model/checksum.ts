/**
 * Flexible checksums on PutObject. The model checks the ones Node can compute
 * (CRC32, SHA1, SHA256, Content-MD5) the way S3 does, answering BadDigest on
 * a mismatch: that is what proves a decoded aws-chunked body is byte-exact.
 * CRC32C and CRC64NVME are kept and echoed but not verified.
 */
import { createHash } from 'node:crypto';
import * as zlib from 'node:zlib';
import { badDigest } from './errors';
import type { StoredChecksum } from './store';

const ALGORITHMS = ['crc32', 'crc32c', 'crc64nvme', 'sha1', 'sha256'] as const;

/** Finds the checksum sent in a header or an aws-chunked trailer, if any. */
export function findChecksum(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  trailers: ReadonlyMap<string, string>,
): StoredChecksum | null {
  for (const name of ALGORITHMS) {
    const header = `x-amz-checksum-${name}`;
    const value = trailers.get(header) ?? headers[header];
    if (typeof value === 'string' && value) return { algorithm: name.toUpperCase(), value };
  }
  return null;
}

function compute(algorithm: string, body: Buffer): string | null {
  switch (algorithm) {
    case 'CRC32': {
      // zlib.crc32 exists from Node 20.15; without it the value is stored unchecked.
      const crc32 = (zlib as { crc32?: (data: Buffer) => number }).crc32;
      if (!crc32) return null;
      const out = Buffer.alloc(4);
      out.writeUInt32BE(crc32(body) >>> 0);
      return out.toString('base64');
    }
    case 'SHA1':
      return createHash('sha1').update(body).digest('base64');
    case 'SHA256':
      return createHash('sha256').update(body).digest('base64');
    default:
      return null;
  }
}

/** Throws BadDigest when a checksum or Content-MD5 the client sent does not match the body. */
export function verifyBody(body: Buffer, checksum: StoredChecksum | null, contentMd5: string | undefined): void {
  if (contentMd5 !== undefined && createHash('md5').update(body).digest('base64') !== contentMd5) {
    throw badDigest(null);
  }
  if (checksum) {
    const expected = compute(checksum.algorithm, body);
    if (expected !== null && expected !== checksum.value) throw badDigest(checksum.algorithm);
  }
}

/** MD5s of bodies computed already (see `md5Hex`). */
const md5s = new WeakMap<Buffer, string>();

/**
 * A body's MD5 in hex, computed once per buffer: the server computes it when the body has arrived, during
 * the request's latency, as S3 hashes what it receives while receiving it; the handler then finds it.
 */
export function md5Hex(body: Buffer): string {
  let md5 = md5s.get(body);
  if (md5 === undefined) {
    md5 = createHash('md5').update(body).digest('hex');
    md5s.set(body, md5);
  }
  return md5;
}
