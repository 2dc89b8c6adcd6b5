import { Aws } from 'aws-cdk-lib';
import { Effect, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { INDEXER_DIR, INDEX_KEY, LOCK_KEY, SHARD_DIR } from '../../lambda/lib/names';

/**
 * The object-key roots the grants cover: `p/` per prefix, or `''` for the bucket root.
 * Always ending in '/' (or empty) so that prefix `swamp` never reaches `swamp-other/`.
 */
export function keyRoots(prefixes: readonly string[]): string[] {
  return prefixes.length ? prefixes.map((p) => `${p}/`) : [''];
}

/** An S3 write the indexer's role may make. */
export type WriteAction = 's3:PutObject' | 's3:DeleteObject';

/** One object-key pattern the role may write (IAM glob: `*` matches any characters, `/` included). */
export interface KeyGrant {
  /** The object key pattern, relative to the bucket. */
  readonly pattern: string;
  readonly actions: readonly WriteAction[];
  /** What the indexer keeps there. */
  readonly what: string;
  /** Why no data key matches the pattern. */
  readonly why: string;
}

/**
 * Splits a `namespaces` entry (`<prefix>/<namespace>`, or `<namespace>` for the bucket root) into its root
 * (`p/` or `''`) and namespace, or undefined when it lies in no configured root.
 */
export function namespaceRoot(prefixes: readonly string[], entry: string): { root: string; namespace: string } | undefined {
  for (const root of keyRoots(prefixes)) {
    if (!entry.startsWith(root)) continue;
    const namespace = entry.slice(root.length);
    if (namespace !== '' && !namespace.includes('/')) return { root, namespace };
  }
  return undefined;
}

/**
 * Every object key pattern the indexer's role may write or delete: per root its index, partition files and
 * manifest, lock and own control folder; per listed namespace its index, partition files and manifest. The
 * only `*` in a pattern follows `_index/` or `_control/datastore-indexer/`, so whatever it matches lies under a
 * folder swamp clients treat as internal (never indexed, never pulled). The construct's statements and the
 * README's table are both made from this list.
 */
export function indexerKeyGrants(prefixes: readonly string[], namespaces: readonly string[] = []): KeyGrant[] {
  const grants: KeyGrant[] = [];
  const scopeGrants = (base: string, scope: string): KeyGrant[] => [
    {
      pattern: `${base}${INDEX_KEY}`,
      actions: ['s3:PutObject'],
      what: `the ${scope} index`,
      why: 'one exact internal name',
    },
    {
      pattern: `${base}${SHARD_DIR}*.json`,
      actions: ['s3:PutObject'],
      what: `the ${scope} partition files and manifest (\`_meta.json\`)`,
      why: 'the `*` lies under `_index/`, internal in every scope',
    },
  ];
  for (const root of keyRoots(prefixes)) {
    grants.push(
      ...scopeGrants(root, "root's"),
      {
        pattern: `${root}${LOCK_KEY}`,
        actions: ['s3:PutObject', 's3:DeleteObject'],
        what: "the root's lock (namespaces share it)",
        why: 'one exact internal name',
      },
      {
        pattern: `${root}${INDEXER_DIR}*`,
        actions: ['s3:PutObject', 's3:DeleteObject'],
        what: "the indexer's own records, the namespaces' included (publish intents, repair progress, copies of unreadable indexes)",
        why: 'the `*` lies under `_control/`, internal in every scope',
      },
    );
    for (const entry of namespaces) {
      const at = namespaceRoot(prefixes, entry);
      if (at?.root === root) grants.push(...scopeGrants(`${root}${at.namespace}/`, `namespace \`${at.namespace}\``));
    }
  }
  return grants;
}

/**
 * The S3 statements of the indexer's role, scoped to the datastore roots.
 *
 * - ListBucket on the bucket, limited by `s3:prefix` to the roots (no condition at the bucket root);
 * - GetObject on every object under each root (GetObject also answers HeadObject);
 * - PutObject and DeleteObject only on the names the indexer writes (`indexerKeyGrants`): no data key of any
 *   layout, namespaced data included. IAM's `*` crosses `/`, so no pattern has a `*` before a fixed name: one
 *   for every namespace's index would also match a data key such as `<root>/data/x/.datastore-index.json`.
 *   Namespaces are granted only when listed (`namespaces` prop).
 *
 * Every statement holds `s3:ResourceAccount`: a bucket ARN names no account, so a bucket of that name in another
 * account is never reached. No statement names `*` as a resource.
 */
export function s3AccessStatements(
  bucketArn: string,
  prefixes: readonly string[],
  namespaces: readonly string[] = [],
  account: string = Aws.ACCOUNT_ID,
): PolicyStatement[] {
  const roots = keyRoots(prefixes);
  const owned = { StringEquals: { 's3:ResourceAccount': account } };
  const grants = indexerKeyGrants(prefixes, namespaces);
  const arnsFor = (action: WriteAction): string[] =>
    grants.filter((g) => g.actions.includes(action)).map((g) => `${bucketArn}/${g.pattern}`);
  const list = new PolicyStatement({
    sid: 'ListDatastoreRoots',
    effect: Effect.ALLOW,
    actions: ['s3:ListBucket'],
    resources: [bucketArn],
    conditions: {
      ...owned,
      ...(prefixes.length ? { StringLike: { 's3:prefix': prefixes.flatMap((p) => [p, `${p}/`, `${p}/*`]) } } : {}),
    },
  });
  const read = new PolicyStatement({
    sid: 'ReadDatastoreObjects',
    effect: Effect.ALLOW,
    actions: ['s3:GetObject'],
    resources: roots.map((r) => `${bucketArn}/${r}*`),
    conditions: owned,
  });
  const write = new PolicyStatement({
    sid: 'WriteIndexerKeys',
    effect: Effect.ALLOW,
    actions: ['s3:PutObject'],
    resources: arnsFor('s3:PutObject'),
    conditions: owned,
  });
  const deleteInternal = new PolicyStatement({
    sid: 'DeleteLocksAndControlKeys',
    effect: Effect.ALLOW,
    actions: ['s3:DeleteObject'],
    resources: arnsFor('s3:DeleteObject'),
    conditions: owned,
  });
  return [list, read, write, deleteInternal];
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
