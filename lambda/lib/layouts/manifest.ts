/** The partition manifest `_index/_meta.json`, read exactly as clients read it. */

/** The shard-first manifest; unknown fields are kept. */
export interface ShardMeta {
  version: 2;
  partitions: string[];
  commitSeq: number;
  [field: string]: unknown;
}

/** The dual-write manifest: which partition files mirror the monolith. */
export interface MirrorMeta {
  version: 1;
  partitions: string[];
  [field: string]: unknown;
}

/** A `_meta.json` as clients read it: a manifest of version 1 or 2, `ignored` (parses, but clients take it for none), or `unparsable`. */
type ManifestRead =
  | { readonly kind: 'v2'; readonly meta: ShardMeta }
  | { readonly kind: 'v1'; readonly meta: MirrorMeta }
  | { readonly kind: 'ignored' }
  | { readonly kind: 'unparsable'; readonly reason: string };

/** Reads manifest bytes exactly as clients do: JSON with `version` 1 or 2 and a `partitions` array, else ignored; bad JSON makes them throw. */
export function readManifest(bytes: Buffer): ManifestRead {
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    return { kind: 'unparsable', reason: `not JSON (${(err as Error).message})` };
  }
  if (typeof json !== 'object' || json === null) return { kind: 'unparsable', reason: 'not a JSON object' };
  const meta = json as Record<string, unknown>;
  if (!Array.isArray(meta.partitions) || (meta.version !== 1 && meta.version !== 2)) return { kind: 'ignored' };
  const partitions = meta.partitions.filter((p): p is string => typeof p === 'string');
  if (meta.version === 1) return { kind: 'v1', meta: { ...meta, version: 1, partitions } };
  return { kind: 'v2', meta: { ...meta, version: 2, partitions, commitSeq: typeof meta.commitSeq === 'number' ? meta.commitSeq : 0 } };
}

/** What the bytes of an unparsable manifest still say: the version, and the commitSeq, when written plainly. */
export function salvageManifest(bytes: Buffer): { version?: 1 | 2; commitSeq?: number } {
  const text = bytes.toString('utf8');
  const version = /"version"\s*:\s*([12])\b/.exec(text);
  const seq = /"commitSeq"\s*:\s*(\d{1,15})\b/.exec(text);
  return { version: version ? (Number(version[1]) as 1 | 2) : undefined, commitSeq: seq ? Number(seq[1]) : undefined };
}
