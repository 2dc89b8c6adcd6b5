/**
 * The indexing library, as the package exports it: what a program needs to check, repair and hydrate a
 * swamp S3 datastore. Applying S3 object events is the `s3-datastore-indexer/events` entry
 * (`./event-api`); everything else in this folder is internal (the project imports each module directly).
 *
 * @example
 * const config = resolveDatastoreConfig('{"bucket":"b","prefix":"swamp"}');
 * const store = S3Store.connect(config, config.bucket);
 * const report = await healRoot(store, rootOf(config), { mode: 'check' });
 * const pulled = await healAndHydrate(store, rootOf(config), { cacheDir: '.swamp/cache' });
 */

// Errors: every one is an IndexerError with a `hint` a user can act on.
export {
  AccessDeniedError,
  ArchivedObjectError,
  BucketNotFoundError,
  CacheError,
  ConditionalWritesUnsupportedError,
  ConfigError,
  CredentialsError,
  DownloadError,
  EmptyDatastoreError,
  HeldScopeError,
  IndexTooLargeError,
  IndexerError,
  LockBusyError,
  LockReleasedError,
  NotAListingError,
  PublishConflictError,
  S3UnavailableError,
  UnexpectedError,
  UnsafeKeyError,
} from './errors';

// Where the datastore is: swamp's `{bucket, prefix, region, endpoint, forcePathStyle}`, roots and scopes.
export {
  type DatastoreConfig,
  type S3Settings,
  checkAccountId,
  normalizePrefix,
  parseDatastoreConfig,
  resolveDatastoreConfig,
  rootOf,
} from './config';
export { type DatastoreRoot, type IndexScope, describeScope } from './scope';
export {
  type GetOptions,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  type OpenedObject,
  type StoredObject,
  type WriteCondition,
  type WriteResult,
  S3Store,
} from './s3';
export { createS3Client } from './s3-client';
export type { RequestObserver } from './s3-direct';
export { namespaceExists } from './list';

// The keys the contract names.
export { INDEX_KEY, checkNamespaceName } from './names';
export { isInternalKey, isRefusedKey, refusedKeyReason } from './keys';

// An index as clients read it.
export type { DatastoreIndex, IndexEntry, ListedObject, ParsedIndex } from './index-file';
export { parseIndex } from './parse-index';

// Check and repair: one listing, every index of the root.
export { type HealMode, type HealOptions, type HealReport, type ScopeReport, hasDrift, healRoot } from './heal';
export type { Drift, DriftCounts, ResizedEntry } from './drift';
export type { Layout } from './layouts/types';
export type { MemoryBudget } from './memory';
export type { PublishEvent, PublishOptions } from './publish';
export { type ClientTurn, type LockOptions, releaseHeldLocks } from './lock';
export type { LockClock } from './lock-clock';
export { HeldLocks, type Releasable } from './held-locks';
export { type Lister, type ScopedListing, sequentialLister } from './list';
export { type ParallelListOptions, parallelLister } from './parallel-list';
export type { ListingHint } from './parallel-hint';
export { type ResumableRepairOptions, type ResumableRepairResult, repairResumable } from './repair';

// Hydrate: heal, then download what the index lists into a local cache.
export {
  type HealAndHydrateOptions,
  type HealAndHydrateReport,
  type HydrateOptions,
  type ArchivedKey,
  type HydrateReport,
  DEFAULT_HYDRATE_CONCURRENCY,
  healAndHydrate,
  hydrateCache,
} from './hydrate';
