/**
 * The indexing library, as the package exports it: what a caller needs to check, repair and hydrate a
 * swamp S3 datastore and to apply S3 object events to its indexes. Everything else in this folder is
 * internal (the project imports it from its own module).
 *
 * @example
 * const config = resolveDatastoreConfig('{"bucket":"b","prefix":"swamp"}');
 * const store = S3Store.connect(config, config.bucket);
 * const report = await healRoot(store, rootOf(config), { mode: 'check' });
 * const pulled = await healAndHydrate(store, rootOf(config), { cacheDir: '.swamp/cache' });
 */

// Errors: every one is an IndexerError with a `hint` a user can act on.
export * from './errors';
export { ConditionalWritesUnsupportedError } from './s3';

// Where the datastore is: swamp's `{bucket, prefix, region, endpoint, forcePathStyle}`, roots and scopes.
export {
  type DatastoreConfig,
  type DatastoreRoot,
  type IndexScope,
  type S3Settings,
  describeScope,
  normalizePrefix,
  parseDatastoreConfig,
  resolveDatastoreConfig,
  rootBase,
  rootOf,
  scopeBase,
} from './root';
export {
  type GetOptions,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  type StoredObject,
  type WriteCondition,
  type WriteResult,
  S3Store,
  createS3Client,
} from './s3';
export { namespaceExists } from './list';

// The keys the contract names.
export {
  CONTROL_DIR,
  INDEX_KEY,
  LOCK_KEY,
  NAMESPACE_MARKER,
  SHARD_DIR,
  SHARD_META_KEY,
  isInternalKey,
  isRefusedKey,
  refusedKeyReason,
} from './keys';

// An index as clients read it.
export { type DatastoreIndex, type IndexEntry, type ListedObject, type ParsedIndex, parseIndex } from './index-file';

// Check and repair: one listing, every index of the root.
export { type HealMode, type HealOptions, type HealReport, type ScopeReport, healRoot } from './heal';
export type { Drift, DriftCounts, ResizedEntry } from './drift';
export type { Layout, LiveIndex } from './live-index';
export type { PublishEvent, PublishOptions, PublishOutcome } from './publish';
export { type LockOptions, releaseHeldLocks } from './lock';
export { type Lister, type ParallelListOptions, type ScopedListing, parallelLister, sequentialLister } from './list';
export { type ResumableRepairOptions, type ResumableRepairResult, repairResumable } from './repair';

// Hydrate: heal, then download what the index lists into a local cache.
export {
  type HealAndHydrateOptions,
  type HealAndHydrateReport,
  type HydrateOptions,
  type HydrateReport,
  DEFAULT_HYDRATE_CONCURRENCY,
  healAndHydrate,
  hydrateCache,
} from './hydrate';

// Object events: parse a message, place each change in its index, apply the latest change per key.
export { type ChangePlacement, type NotificationMessage, parseNotification, placeChange } from './notifications';
export { type ObjectChange, decodeEventKey, latestChanges } from './events';
export { type ScopedKey, NamespaceResolver } from './namespaces';
export { type DeltaReport, applyDelta } from './delta';
