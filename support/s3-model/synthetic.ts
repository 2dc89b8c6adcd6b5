/**
 * Bodies of seeded objects. They are never stored: a seeded object keeps only
 * its size, and its body is a fixed byte pattern cut to that size. Its ETag is
 * the real MD5 of those bytes, so a client that GETs it sees what S3 would
 * show for such content; objects of equal size share body and ETag.
 */
import { createHash } from 'node:crypto';

const PATTERN_SIZE = 4096;

/** 4 KiB of printable pseudo-random bytes (deterministic), repeated to any size. */
const PATTERN: Buffer = (() => {
  const out = Buffer.alloc(PATTERN_SIZE);
  let state = 0x9e3779b9;
  for (let i = 0; i < PATTERN_SIZE; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    out[i] = 0x21 + ((state >>> 24) % 94);
  }
  return out;
})();

/** The body of a seeded object of `size` bytes. */
export function syntheticBody(size: number): Buffer {
  const out = Buffer.allocUnsafe(size);
  for (let at = 0; at < size; at += PATTERN_SIZE) PATTERN.copy(out, at, 0, Math.min(PATTERN_SIZE, size - at));
  return out;
}

const etagBySize = new Map<number, string>();

/** Quoted MD5 of `syntheticBody(size)`, computed once per distinct size. */
export function syntheticEtag(size: number): string {
  let etag = etagBySize.get(size);
  if (etag === undefined) {
    etag = `"${createHash('md5').update(syntheticBody(size)).digest('hex')}"`;
    etagBySize.set(size, etag);
  }
  return etag;
}
