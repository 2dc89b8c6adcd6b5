/** The direct path's GetObject signer (`s3-sign.ts`) against the SDK's `SignatureV4`: the same headers, byte for byte. */
import { createHash, createHmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import { RequestSigner, canonicalQuery } from '../../lambda/lib/s3-sign';

/** SHA-256 and its HMAC in the shape the SDK's signer takes. */
class Sha256 {
  private readonly hash;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return this.hash.digest();
  }
  reset(): void {}
}

function bytes(data: string | ArrayBuffer | ArrayBufferView): string | Buffer {
  if (typeof data === 'string') return data;
  return ArrayBuffer.isView(data) ? Buffer.from(data.buffer, data.byteOffset, data.byteLength) : Buffer.from(data);
}

interface SignCase {
  readonly name: string;
  readonly credentials: typeof BASE & { sessionToken?: string };
  readonly headers: Record<string, string>;
  readonly query: Record<string, string>;
}

const BASE = { accessKeyId: 'AKIDSIGNTEST', secretAccessKey: 'sign/secret+key' };
const AT = Date.UTC(2026, 11, 3, 23, 59, 59, 900);

async function sdkHeaders(
  credentials: typeof BASE & { sessionToken?: string },
  headers: Record<string, string>,
  path: string,
  query: Record<string, string>,
  at: number,
): Promise<Record<string, string>> {
  const signer = new SignatureV4({
    credentials,
    region: 'eu-west-3',
    service: 's3',
    sha256: Sha256,
    uriEscapePath: false,
    applyChecksum: true,
  });
  const signed = await signer.sign(
    { method: 'GET', protocol: 'https:', hostname: 'h', path, query, headers: { ...headers } },
    { signingDate: new Date(at) },
  );
  return signed.headers;
}

describe('RequestSigner', () => {
  const cases: SignCase[] = [
    { name: 'long-term credentials', credentials: BASE, headers: { host: 'bucket.s3.eu-west-3.amazonaws.com' }, query: {} },
    {
      name: 'a session token and endpoint headers',
      credentials: { ...BASE, sessionToken: 'token  with\tblanks ' },
      headers: { host: '127.0.0.1:9000', 'X-Custom': '  a   b ', 'User-Agent': 'never signed' },
      query: {},
    },
    {
      name: 'a query',
      credentials: BASE,
      headers: { host: 'h' },
      query: { 'list-type': '2', prefix: "a b/(c)*!'", 'encoding-type': 'url' },
    },
  ];
  for (const c of cases) {
    test(`signs as the SDK does with ${c.name}`, async () => {
      const path = '/bucket/team/data/a%20b/%E6%97%A5.json';
      for (const at of [AT, AT + 1000, AT + 86_400_000]) {
        const ours = await new RequestSigner(c.credentials, 'eu-west-3', 's3', c.headers).sign('GET', path, canonicalQuery(c.query), at);
        expect(ours).toEqual(await sdkHeaders(c.credentials, c.headers, path, c.query, at));
      }
    });
  }

  test('asks the provider on every request and signs with what it gives once credentials are refreshed', async () => {
    let credentials: typeof BASE = BASE;
    const signer = new RequestSigner(async () => credentials, 'eu-west-3', 's3', { host: 'h' });
    await signer.sign('GET', '/b/k', '', AT);
    credentials = { accessKeyId: 'AKIDREFRESHED', secretAccessKey: 'another secret' };
    expect(await signer.sign('GET', '/b/k', '', AT)).toEqual(await sdkHeaders(credentials, { host: 'h' }, '/b/k', {}, AT));
  });

  test('refuses credentials without a secret, as the SDK does, with a CredentialsError saying what to check', async () => {
    const signer = new RequestSigner(async () => ({ accessKeyId: 'A' }) as never, 'eu-west-3', 's3', { host: 'h' });
    await expect(signer.sign('GET', '/b/k', '', AT)).rejects.toMatchObject({
      name: 'CredentialsError',
      hint: expect.stringContaining('AWS_PROFILE'),
    });
  });
});
