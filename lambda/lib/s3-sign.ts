/**
 * SigV4 for the direct path's bodiless requests, as the SDK's `SignatureV4` signs them (same headers signed,
 * same canonical forms), without the work it repeats on every request: the signing key is derived once per
 * day and credentials rather than hashed again to be looked up, and the endpoint's own headers are put in
 * canonical form once.
 */
import { createHash, createHmac } from 'node:crypto';
import { CredentialsError } from './errors';
import { escapeUri } from './s3-endpoint';

/** Credentials as the SDK's providers resolve them. */
export interface SigningCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

/** A fixed credential or the client's provider, called on every request so that a refresh is seen. */
export type CredentialSource = SigningCredentials | (() => Promise<SigningCredentials>);

/** Headers the SDK never signs (hop-by-hop, or changed by proxies), and those the signer writes itself. */
const UNSIGNABLE = new Set([
  'authorization',
  'cache-control',
  'connection',
  'expect',
  'from',
  'keep-alive',
  'max-forwards',
  'pragma',
  'referer',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'user-agent',
  'x-amzn-trace-id',
]);
const GENERATED = new Set(['authorization', 'x-amz-date', 'date']);

/** The SHA-256 of an empty body: the payload hash of a GET or HEAD. */
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** A header value as SigV4 canonicalises it: line breaks and runs of blanks made one space, ends trimmed. */
function canonicalValue(value: string): string {
  return value
    .replace(/[\r\n]/g, ' ')
    .replace(/[ \t]+/g, ' ')
    .replace(/^ | $/g, '');
}

/** A query in SigV4's canonical form: names and values escaped, sorted by escaped name. */
export function canonicalQuery(query: Readonly<Record<string, string>>): string {
  const pairs: [string, string][] = [];
  for (const name of Object.keys(query)) {
    if (name.toLowerCase() === 'x-amz-signature') continue;
    pairs.push([escapeUri(name), escapeUri(query[name])]);
  }
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

/** Signs requests without a body for one endpoint (its region, its fixed headers) with SigV4. */
export class RequestSigner {
  private readonly fixed: Record<string, string> = {};
  /** The endpoint's signed headers, lowercased and canonical, sorted by name. */
  private readonly canonical: [string, string][] = [];
  private readonly payloadHash: string;
  private key?: { readonly day: string; readonly credentials: SigningCredentials; readonly bytes: Buffer };
  private stamp?: { readonly second: number; readonly long: string };

  constructor(
    private readonly credentials: CredentialSource,
    private readonly region: string,
    private readonly service: string,
    headers: Readonly<Record<string, string>>,
  ) {
    let payloadHash: string | undefined;
    for (const [name, value] of Object.entries(headers)) {
      const lower = name.toLowerCase();
      if (GENERATED.has(lower)) continue;
      this.fixed[name] = value;
      if (lower === 'x-amz-content-sha256') payloadHash = value;
      if (UNSIGNABLE.has(lower) || lower.startsWith('proxy-') || lower.startsWith('sec-')) continue;
      this.canonical.push([lower, canonicalValue(value)]);
    }
    this.payloadHash = payloadHash ?? EMPTY_SHA256;
    if (payloadHash === undefined) this.canonical.push(['x-amz-content-sha256', EMPTY_SHA256]);
  }

  /** The headers to send `method` `path` (already escaped) with `query` at `now` (ms, clock offset applied), the authorization among them. */
  async sign(method: string, path: string, query: string, now: number): Promise<Record<string, string>> {
    const credentials = typeof this.credentials === 'function' ? await this.credentials() : this.credentials;
    if (typeof credentials?.accessKeyId !== 'string' || typeof credentials.secretAccessKey !== 'string')
      throw new CredentialsError(
        'The AWS credential chain resolved to no access key and secret, so nothing was sent to S3',
        'Check AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the credentials given to the client',
      );
    const long = this.longDate(now);
    const day = long.slice(0, 8);
    const scope = `${day}/${this.region}/${this.service}/aws4_request`;
    const dynamic: [string, string][] = [['x-amz-date', long]];
    if (credentials.sessionToken) dynamic.push(['x-amz-security-token', canonicalValue(credentials.sessionToken)]);
    const entries = this.canonical.concat(dynamic).sort((a, b) => (a[0] < b[0] ? -1 : 1));
    let headerBlock = '';
    let signedHeaders = '';
    for (const [name, value] of entries) {
      headerBlock += `${name}:${value}\n`;
      signedHeaders += signedHeaders ? `;${name}` : name;
    }
    const request = `${method}\n${path}\n${query}\n${headerBlock}\n${signedHeaders}\n${this.payloadHash}`;
    const toSign = `AWS4-HMAC-SHA256\n${long}\n${scope}\n${createHash('sha256').update(request).digest('hex')}`;
    const signature = createHmac('sha256', this.signingKey(day, credentials)).update(toSign).digest('hex');
    const headers: Record<string, string> = { ...this.fixed, 'x-amz-date': long };
    if (credentials.sessionToken) headers['x-amz-security-token'] = credentials.sessionToken;
    if (this.payloadHash === EMPTY_SHA256 && !('x-amz-content-sha256' in this.fixed)) headers['x-amz-content-sha256'] = EMPTY_SHA256;
    headers.authorization = `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
    return headers;
  }

  /** `YYYYMMDDTHHMMSSZ` of `now`, formatted once a second. */
  private longDate(now: number): string {
    const second = Math.floor(now / 1000);
    if (this.stamp?.second !== second)
      this.stamp = { second, long: `${new Date(second * 1000).toISOString().slice(0, 19).replace(/[-:]/g, '')}Z` };
    return this.stamp.long;
  }

  /** The key derived from the secret for `day`, kept while the day and the credentials stay the same. */
  private signingKey(day: string, credentials: SigningCredentials): Buffer {
    const held = this.key;
    if (
      held?.day === day &&
      held.credentials.accessKeyId === credentials.accessKeyId &&
      held.credentials.secretAccessKey === credentials.secretAccessKey &&
      held.credentials.sessionToken === credentials.sessionToken
    )
      return held.bytes;
    let bytes: Buffer | string = `AWS4${credentials.secretAccessKey}`;
    for (const part of [day, this.region, this.service, 'aws4_request']) bytes = createHmac('sha256', bytes).update(part).digest();
    this.key = { day, credentials: { ...credentials }, bytes: bytes as Buffer };
    return this.key.bytes;
  }
}
