/** The README's permissions table is generated from the construct's grants and matches the synthesised role. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { permissionsTable, withPermissionsTable } from '../../infra/private/permissions-table';
import { indexerStack, propsOf } from './helpers';

const README = join(__dirname, '..', '..', 'README.md');

test('README.md holds the generated table (npm run docs:permissions writes it)', () => {
  const readme = readFileSync(README, 'utf8');
  expect(readme).toEqual(withPermissionsTable(readme));
});

test("every write resource of the synthesised role is a row of the table, and every row's key is granted", () => {
  const { template } = indexerStack({ prefixes: ['p'], namespaces: ['p/ns'] });
  const statements = (
    propsOf(template, 'AWS::IAM::Policy', 'IndexerDatastoreAccess').PolicyDocument as {
      Statement: { Action: string | string[]; Resource: unknown }[];
    }
  ).Statement;
  const keysOf = (action: string): string[] =>
    statements
      .filter((s) => [s.Action].flat().includes(action))
      .flatMap((s) => [s.Resource].flat())
      .map((r) => JSON.stringify(r).match(/:::shared-bucket\/([^"]*)"/)?.[1])
      .filter((k): k is string => k !== undefined);
  const table = permissionsTable();
  const rowsOf = (action: string): string[] =>
    table
      .split('\n')
      .filter((row) => row.startsWith('| ') && row.split(' | ')[0].includes(`\`${action}\``))
      .map((row) => row.split(' | ')[1].match(/`bucket\/([^`]*)`/)?.[1])
      .filter((k): k is string => k !== undefined);
  for (const action of ['s3:PutObject', 's3:DeleteObject', 's3:GetObject'])
    expect([action, rowsOf(action).sort()]).toEqual([action, keysOf(action).sort()]);
});
