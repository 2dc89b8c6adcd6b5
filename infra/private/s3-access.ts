import { Aws } from 'aws-cdk-lib';
import { Effect, PolicyStatement } from 'aws-cdk-lib/aws-iam';

/**
 * The object-key roots the grants cover: `p/` per prefix, or `''` for the bucket root.
 * Always ending in '/' (or empty) so that prefix `swamp` never reaches `swamp-other/`.
 */
export function keyRoots(prefixes: readonly string[]): string[] {
  return prefixes.length ? prefixes.map((p) => `${p}/`) : [''];
}

/**
 * The S3 statements of the indexer's role, scoped to the datastore roots.
 *
 * - ListBucket on the bucket, limited by `s3:prefix` to the roots (no condition at the bucket root);
 * - GetObject and PutObject on the objects under each root (index, shards, lock, `_control/`;
 *   GetObject also answers HeadObject);
 * - DeleteObject only on the root's lock and the indexer's own folder `_control/datastore-indexer/`: the indexer
 *   never deletes data. IAM's `*` crosses `/`, so no pattern may have a `*` before a fixed name: one for
 *   namespace control folders would also match a data key such as `<root>/data/x/_control/y`.
 *
 * No statement names `*` as a resource.
 */
export function s3AccessStatements(bucketArn: string, prefixes: readonly string[]): PolicyStatement[] {
  const roots = keyRoots(prefixes);
  const list = new PolicyStatement({
    sid: 'ListDatastoreRoots',
    effect: Effect.ALLOW,
    actions: ['s3:ListBucket'],
    resources: [bucketArn],
    ...(prefixes.length ? { conditions: { StringLike: { 's3:prefix': prefixes.flatMap((p) => [p, `${p}/`, `${p}/*`]) } } } : {}),
  });
  const readWrite = new PolicyStatement({
    sid: 'ReadWriteDatastoreObjects',
    effect: Effect.ALLOW,
    actions: ['s3:GetObject', 's3:PutObject'],
    resources: roots.map((r) => `${bucketArn}/${r}*`),
  });
  const deleteInternal = new PolicyStatement({
    sid: 'DeleteLocksAndControlKeys',
    effect: Effect.ALLOW,
    actions: ['s3:DeleteObject'],
    // Namespaces share the root's lock, and the indexer keeps their records in the root's folder too.
    resources: roots.flatMap((r) => [`${bucketArn}/${r}.datastore.lock`, `${bucketArn}/${r}_control/datastore-indexer/*`]),
  });
  return [list, readWrite, deleteInternal];
}

/** Use of the bucket's SSE-KMS key, only through S3 in this region. */
export function kmsAccessStatement(keyArn: string): PolicyStatement {
  return new PolicyStatement({
    sid: 'UseBucketKeyThroughS3',
    effect: Effect.ALLOW,
    actions: ['kms:Decrypt', 'kms:GenerateDataKey'],
    resources: [keyArn],
    conditions: { StringEquals: { 'kms:ViaService': `s3.${Aws.REGION}.amazonaws.com` } },
  });
}
