/** Writes the README's table of S3 permissions from the construct's own grants (`npm run docs:permissions`). */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { withPermissionsTable } from '../infra/private/permissions-table';

const readme = join(__dirname, '..', 'README.md');
writeFileSync(readme, withPermissionsTable(readFileSync(readme, 'utf8')));
