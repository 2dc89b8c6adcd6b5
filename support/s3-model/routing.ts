/**
 * From an HTTP request line to an S3 operation: path-style bucket and key,
 * the query string, and which operation that makes.
 */
import type { IncomingMessage } from 'node:http';
import { S3Error } from './errors';

/** The operations the model counts; anything else it answers 501 and counts as Unsupported. */
export const S3_OPERATIONS = [
  'ListObjectsV2',
  'GetObject',
  'HeadObject',
  'PutObject',
  'DeleteObject',
  'CreateBucket',
  'HeadBucket',
  'DeleteBucket',
  'Unsupported',
] as const;
export type S3Operation = (typeof S3_OPERATIONS)[number];
export type RequestCounts = Record<S3Operation, number>;

/** The parts of a request the handlers need, parsed once. */
export interface ParsedRequest {
  readonly method: string;
  readonly bucket: string;
  /** Null for bucket-level requests. */
  readonly key: string | null;
  readonly query: ReadonlyMap<string, string>;
  readonly headers: IncomingMessage['headers'];
  readonly body: Buffer;
}

/**
 * Splits the query by hand: URLSearchParams would turn `+` into a space, but
 * S3 reads `+` in a query literally and the SDK sends a space as `%20`.
 */
function parseQuery(raw: string): Map<string, string> {
  const query = new Map<string, string>();
  for (const part of raw.split('&')) {
    if (!part) continue;
    const eq = part.indexOf('=');
    const name = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
    query.set(name, eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1)));
  }
  return query;
}

export function parseTarget(url: string): { bucket: string; key: string | null; query: Map<string, string> } {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  try {
    const query = parseQuery(q < 0 ? '' : url.slice(q + 1));
    const rest = path.slice(1);
    const slash = rest.indexOf('/');
    if (slash < 0) return { bucket: decodeURIComponent(rest), key: null, query };
    const key = decodeURIComponent(rest.slice(slash + 1));
    return { bucket: decodeURIComponent(rest.slice(0, slash)), key: key === '' ? null : key, query };
  } catch {
    throw new S3Error(400, 'InvalidURI', "Couldn't parse the specified URI.", [['URI', url]]);
  }
}

export function operationOf(method: string, key: string | null, query: ReadonlyMap<string, string>): S3Operation {
  // Sub-resources (?acl, ?uploads, ?tagging, ?versionId, ...) are other operations.
  const plain = [...query.keys()].every((k) => k === 'x-id');
  if (key === null) {
    if (method === 'GET' && query.get('list-type') === '2') return 'ListObjectsV2';
    if (!plain) return 'Unsupported';
    if (method === 'PUT') return 'CreateBucket';
    if (method === 'HEAD') return 'HeadBucket';
    if (method === 'DELETE') return 'DeleteBucket';
    return 'Unsupported';
  }
  if (!plain) return 'Unsupported';
  switch (method) {
    case 'GET':
      return 'GetObject';
    case 'HEAD':
      return 'HeadObject';
    case 'PUT':
      return 'PutObject';
    case 'DELETE':
      return 'DeleteObject';
    default:
      return 'Unsupported';
  }
}
