/**
 * IAM evaluation for the tests: S3 REST requests recorded on loopback, turned into the IAM action, resource and
 * context keys AWS would authorise them with, and evaluated against the identity policies of the indexer's role
 * in a synthesised template (with @cloud-copilot/iam-simulate).
 */
import type { IncomingMessage } from 'node:http';
import { runSimulation } from '@cloud-copilot/iam-simulate';
import { type LoopbackProxy, startLoopbackProxy } from './proxy';

/** One S3 request as IAM sees it. */
export interface S3Authorisation {
  readonly action: string;
  readonly bucket: string;
  /** The object key, for object actions. */
  readonly key?: string;
  /** `s3:prefix` of a listing. */
  readonly prefix?: string;
  /** The request as sent (method and path), for messages. */
  readonly sent: string;
}

/**
 * The IAM view of a path-style S3 REST request: GET/HEAD of an object => s3:GetObject, PUT (and the multipart
 * calls) => s3:PutObject, DELETE => s3:DeleteObject (s3:AbortMultipartUpload with an uploadId), GET or HEAD of
 * the bucket => s3:ListBucket with `s3:prefix` (ListObjectsV2, ListObjects, HeadBucket), anything else
 * `s3:Unsupported:<method>` so that a test meets it rather than passes it by.
 */
export function authorisationOf(method: string, url: string): S3Authorisation {
  const parsed = new URL(url, 'http://recorder');
  const path = parsed.pathname.slice(1);
  const slash = path.indexOf('/');
  const bucket = decodeURIComponent(slash < 0 ? path : path.slice(0, slash));
  const key = slash < 0 ? '' : decodeURIComponent(path.slice(slash + 1));
  const q = parsed.searchParams;
  const sent = `${method} ${url}`;
  if (key === '') {
    if (
      (method === 'GET' &&
        ![...q.keys()].some(
          (k) =>
            ![
              'list-type',
              'prefix',
              'delimiter',
              'max-keys',
              'continuation-token',
              'start-after',
              'encoding-type',
              'marker',
              'fetch-owner',
              'x-id',
            ].includes(k),
        )) ||
      method === 'HEAD'
    )
      return { action: 's3:ListBucket', bucket, prefix: q.get('prefix') ?? '', sent };
    return { action: `s3:Unsupported:${method}`, bucket, sent };
  }
  if (method === 'GET' || method === 'HEAD') return { action: 's3:GetObject', bucket, key, sent };
  if (method === 'PUT' || (method === 'POST' && (q.has('uploads') || q.has('uploadId'))))
    return { action: 's3:PutObject', bucket, key, sent };
  if (method === 'DELETE') return { action: q.has('uploadId') ? 's3:AbortMultipartUpload' : 's3:DeleteObject', bucket, key, sent };
  return { action: `s3:Unsupported:${method}`, bucket, key, sent };
}

/** A loopback proxy that records the IAM view of every request it forwards. */
export interface RecordingProxy extends LoopbackProxy {
  readonly recorded: S3Authorisation[];
}

/** Starts a recording proxy on 127.0.0.1 in front of `target`. */
export async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const recorded: S3Authorisation[] = [];
  const proxy = await startLoopbackProxy(target, (req: IncomingMessage) => {
    recorded.push(authorisationOf(req.method ?? 'GET', req.url ?? '/'));
    return false;
  });
  return { ...proxy, recorded };
}

export const ACCOUNT = '123456789012';
const PSEUDO: Record<string, string> = {
  'AWS::Partition': 'aws',
  'AWS::Region': 'us-east-1',
  'AWS::AccountId': ACCOUNT,
  'AWS::URLSuffix': 'amazonaws.com',
};

type Template = { Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }> };

/** A CloudFormation value made concrete: pseudo parameters, a bucket's Ref/Arn (as `bucketName`), other ARNs by logical id. */
function concrete(value: unknown, template: Template, bucketName: string): unknown {
  if (Array.isArray(value)) return value.map((v) => concrete(v, template, bucketName));
  if (typeof value !== 'object' || value === null) return value;
  const o = value as Record<string, unknown>;
  if ('Ref' in o) {
    const ref = o.Ref as string;
    if (PSEUDO[ref]) return PSEUDO[ref];
    return template.Resources[ref]?.Type === 'AWS::S3::Bucket' ? bucketName : `ref-${ref}`;
  }
  if ('Fn::GetAtt' in o) {
    const [id, attr] = o['Fn::GetAtt'] as [string, string];
    const type = template.Resources[id]?.Type;
    if (type === 'AWS::S3::Bucket' && attr === 'Arn') return `arn:aws:s3:::${bucketName}`;
    if (type === 'AWS::KMS::Key') return `arn:aws:kms:us-east-1:${ACCOUNT}:key/${id}`;
    return `arn:aws:${id}:${attr}`;
  }
  if ('Fn::Join' in o) {
    const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
    return parts.map((p) => concrete(p, template, bucketName)).join(sep);
  }
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, concrete(v, template, bucketName)]));
}

/** The identity policies attached to the role whose logical id starts with `rolePrefix`, made concrete. */
export function rolePolicies(
  synthesised: Record<string, unknown>,
  bucketName: string,
  rolePrefix = 'IndexerServiceRole',
): { name: string; policy: Record<string, unknown> }[] {
  const template = synthesised as Template;
  const roles = Object.keys(template.Resources).filter(
    (id) => id.startsWith(rolePrefix) && template.Resources[id].Type === 'AWS::IAM::Role',
  );
  if (roles.length !== 1) throw new Error(`expected one role ${rolePrefix}*, found ${roles.join(', ') || 'none'}`);
  return Object.entries(template.Resources)
    .filter(([, r]) => r.Type === 'AWS::IAM::Policy' && ((r.Properties?.Roles ?? []) as { Ref?: string }[]).some((x) => x.Ref === roles[0]))
    .map(([name, r]) => ({ name, policy: concrete(r.Properties?.PolicyDocument ?? {}, template, bucketName) as Record<string, unknown> }));
}

/** Every request IAM would not allow, as `decision: action key (as sent)`; equal requests are evaluated once. */
export async function refusedRequests(
  policies: { name: string; policy: Record<string, unknown> }[],
  requests: readonly S3Authorisation[],
): Promise<string[]> {
  const decided = new Map<string, Promise<string>>();
  const refused: string[] = [];
  for (const r of requests) {
    const id = `${r.action} ${r.bucket} ${r.key ?? ''} ${r.prefix ?? ''}`;
    if (!decided.has(id)) decided.set(id, evaluate(policies, r));
    const decision = await decided.get(id)!;
    if (decision !== 'Allowed') refused.push(`${decision}: ${r.action} ${r.key ?? `prefix=${r.prefix}`} (${r.sent})`);
  }
  return refused;
}

/**
 * What IAM decided for one request: `Allowed`, `ImplicitlyDenied`, `ExplicitlyDenied`, or `Error: …`; the bucket
 * belongs to `bucketOwner` (the role's account unless told).
 */
export async function evaluate(
  policies: { name: string; policy: Record<string, unknown> }[],
  request: S3Authorisation,
  bucketOwner: string = ACCOUNT,
): Promise<string> {
  const resource = request.action === 's3:ListBucket' ? `arn:aws:s3:::${request.bucket}` : `arn:aws:s3:::${request.bucket}/${request.key}`;
  const answer = await runSimulation(
    {
      identityPolicies: policies,
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      request: {
        principal: `arn:aws:iam::${ACCOUNT}:role/indexer`,
        action: request.action,
        resource: { resource, accountId: ACCOUNT },
        // The bucket belongs to the deploying account, as the role's `s3:ResourceAccount` conditions require.
        contextVariables: {
          's3:ResourceAccount': bucketOwner,
          ...(request.prefix !== undefined ? { 's3:prefix': request.prefix } : {}),
        },
      },
    },
    {},
  );
  if (answer.resultType === 'error') return `Error: ${JSON.stringify(answer.errors)}`;
  return answer.overallResult;
}
