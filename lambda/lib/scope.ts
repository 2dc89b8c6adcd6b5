/** Where an index lives: a datastore root (bucket and prefix) and, within it, the root's own scope or a namespace's. */

/** A datastore root: a bucket plus an optional key prefix (no leading or trailing `/`). */
export interface DatastoreRoot {
  readonly bucket: string;
  readonly prefix: string;
}

/** One index of a root: the root's own (namespace undefined) or a namespace's. */
export interface IndexScope {
  readonly root: DatastoreRoot;
  readonly namespace?: string;
}

/** A short name for logs and reports: `s3://bucket/prefix[#namespace]`. */
export function describeScope(scope: IndexScope): string {
  const where = `s3://${scope.root.bucket}/${scope.root.prefix}`;
  return scope.namespace ? `${where}#${scope.namespace}` : where;
}
