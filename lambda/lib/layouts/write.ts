/** Writing an index in the layout its scope has. */
import { HeldScopeError } from '../errors';
import type { DatastoreIndex } from '../index-file';
import type { S3Store } from '../s3';
import { type IndexScope, describeScope } from '../scope';
import { writeMonolith } from './mirror';
import { writeShards } from './shards';
import type { IndexWriteResult, LiveIndex, WriteOptions } from './types';

/**
 * Writes `next` in the scope's layout, conditioned on what was read: the monolith (and, beside it, the
 * partition files of every partition that changed, plus the version-1 manifest of a dual-write scope, as a
 * client's push does), or the changed shards then a manifest with a higher `commitSeq`.
 */
export async function writeIndex(
  store: S3Store,
  scope: IndexScope,
  live: LiveIndex,
  next: DatastoreIndex,
  conditional: boolean,
  options: WriteOptions = {},
): Promise<IndexWriteResult> {
  if (live.hold) throw new HeldScopeError(describeScope(scope), live.hold);
  return live.layout === 'shard-first'
    ? writeShards(store, scope, live, next, conditional, options)
    : writeMonolith(store, scope, live, next, conditional, options);
}
