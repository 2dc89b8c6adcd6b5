/**
 * The README's table of the S3 permissions of the command and the role, made from the same grants as the
 * construct's statements (`indexerKeyGrants`), so the two cannot drift apart. `npm run docs:permissions`
 * writes it between the markers; a test fails when the README holds another table.
 */
import { indexerKeyGrants } from './s3-access';

export const TABLE_START = '<!-- permissions-table:start (npm run docs:permissions) -->';
export const TABLE_END = '<!-- permissions-table:end -->';

/** The table for a root `p` with one listed namespace `ns`, as markdown lines. */
export function permissionsTable(): string {
  const grants = indexerKeyGrants(['p'], ['p/ns']);
  const code = (s: string): string => `\`${s}\``;
  const rows = [
    '| action | resource | what for | why no data key |',
    '| --- | --- | --- | --- |',
    '| `s3:ListBucket` | the bucket, `s3:prefix` `p`, `p/`, `p/*` | listing the root (namespaces are found by listing); a re-check lists a folder holding many of its keys | – |',
    '| `s3:GetObject` | `bucket/p/*` | index, partition files, lock; HeadObject of entries that look stale; `hydrate` downloads | reads only |',
    ...grants.map((g) => `| ${g.actions.map(code).join(', ')} | ${code(`bucket/${g.pattern}`)} | ${g.what} | ${g.why} |`),
    "| `kms:Decrypt`, `kms:GenerateDataKey` | the bucket's key, SSE-KMS buckets only, through S3 | reading and writing encrypted objects | – |",
  ];
  return rows.join('\n');
}

/** The README with the generated table put between the markers. */
export function withPermissionsTable(readme: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`README.md has no ${TABLE_START} ... ${TABLE_END} markers`);
  return `${readme.slice(0, start + TABLE_START.length)}\n${permissionsTable()}\n${readme.slice(end)}`;
}
