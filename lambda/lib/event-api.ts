/**
 * The library's event entry (`s3-datastore-indexer/events`): parse an S3 notification, place each change
 * in its index, and apply the latest change per key to that index. The Lambda is built on it.
 *
 * @example
 * const placed = placeChange(root, change, namespaces);
 * const report = await applyDelta(store, scope, latestChanges(events, (c) => c.key.slice(prefix.length)));
 */
export { type ChangePlacement, type NotificationMessage, parseNotification, placeChange } from './notifications';
export { type ObjectChange, decodeEventKey, latestChanges } from './events';
export { type ScopedKey, NamespaceResolver } from './namespaces';
export { type ChangesFor, type DeltaOptions, type DeltaReport, type ResolvedChanges, applyDelta, recheckChanges } from './delta';

// Types the functions above name, also exported by the main entry.
export type { DatastoreIndex, IndexEntry } from './index-file';
export type { DatastoreRoot, IndexScope } from './scope';
export type { S3Store } from './s3';
export type { GetOptions, ListOptions, ListPage, ObjectInfo, OpenedObject, StoredObject, WriteCondition, WriteResult } from './s3-types';
export type { RequestObserver } from './s3-direct';
export type { S3Settings } from './config';
export type { ClientTurn, LockOptions } from './lock';
export type { LockClock } from './lock-clock';
export type { HeldLocks, Releasable } from './held-locks';
export type { PublishEvent, PublishOptions } from './publish';
export type { MemoryBudget } from './memory';
export type { Layout } from './layouts/types';
