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
