/** The versions of an index a publish read: which one a write may rest on, when two are the same, what is copied first. */
import type { KnownIndex, LiveIndex, UnreadablePart } from './layouts/types';

/** True when a layout's index is one object, the monolith: its ETag alone names the version a plan was made for. */
export function monolithIndexed(live: LiveIndex): boolean {
  return live.layout === 'monolith' || live.layout === 'dual-write';
}

/**
 * True when a write may rest on this read made before the lock was taken: its every object is written
 * on the condition of the version read (a monolith, or a partial shard-first read with its manifest).
 */
export function standsBeforeLock(live: LiveIndex): boolean {
  return monolithIndexed(live) || live.shards?.partial !== undefined;
}

/** True when two reads found the same index version: both absent, or the same monolith with the same ETag. */
export function sameVersion(a: LiveIndex, b: LiveIndex): boolean {
  if (a === b) return true;
  if (a.layout !== b.layout || !monolithIndexed(a) || a.state !== b.state) return false;
  if (a.state === 'absent') return true;
  return a.state === 'valid' && b.state === 'valid' && a.etag !== undefined && a.etag === b.etag;
}

/** The version a monolith read holds, so a read of it unchanged is not downloaded again. */
export function knownOf(live: LiveIndex): KnownIndex | undefined {
  return live.state === 'valid' && live.etag ? { etag: live.etag, index: live.index } : undefined;
}

/** The objects of a live index that do not parse and of which a copy is kept before anything replaces them. */
export function unreadablePartsOf(live: LiveIndex): UnreadablePart[] {
  const parts = live.state === 'unreadable' ? [...live.parts] : [];
  const bad = live.badManifest;
  if (bad && !parts.some((p) => p.etag === bad.etag && p.key === bad.key)) parts.unshift(bad);
  return parts;
}
