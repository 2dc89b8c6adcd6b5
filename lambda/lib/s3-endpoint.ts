/** Where a bucket's requests go, resolved once with the S3 client's own endpoint rules, for the direct path (`s3-direct.ts`). */
import type { S3Client } from '@aws-sdk/client-s3';

/** A URI component encoded as S3 and SigV4 want it (RFC 3986: `!'()*` too). */
export function escapeUri(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Where a bucket's requests go, as the SDK's endpoint rules resolve it. */
export interface BucketEndpoint {
  readonly protocol: string;
  /** The host as the Host header names it (an IPv6 address in brackets). */
  readonly host: string;
  readonly hostname: string;
  readonly port?: number;
  /** The path before the key: `/<bucket>` in path style, empty when the bucket is in the host name. */
  readonly basePath: string;
  readonly signingRegion: string;
  readonly headers: Record<string, string>;
}

/** Resolves a bucket's endpoint with the client's own rules (region, custom endpoint, path style, FIPS, dual-stack); undefined when it needs other than plain SigV4. */
export async function resolveBucketEndpoint(client: S3Client, bucket: string): Promise<BucketEndpoint | undefined> {
  const config = client.config as unknown as Record<string, unknown>;
  const value = async (name: string): Promise<unknown> => {
    const v = config[name];
    return typeof v === 'function' ? (v as () => unknown)() : v;
  };
  let endpoint: string | undefined;
  const custom = await value('isCustomEndpoint');
  if (!custom && !(await value('ignoreConfiguredEndpointUrls'))) {
    // An endpoint from the environment or the profile (AWS_ENDPOINT_URL_S3, endpoint_url), as the SDK finds it.
    if (typeof config.serviceConfiguredEndpoint !== 'function') return undefined;
    endpoint = (await value('serviceConfiguredEndpoint')) as string | undefined;
  }
  if (custom) {
    const e = (await value('endpoint')) as { url?: URL; protocol?: string; hostname?: string; port?: number; path?: string } | undefined;
    endpoint = e?.url ? e.url.href : e?.hostname ? `${e.protocol}//${e.hostname}${e.port ? `:${e.port}` : ''}${e.path ?? ''}` : undefined;
  }
  const params = {
    Bucket: bucket,
    Region: await value('region'),
    UseFIPS: await value('useFipsEndpoint'),
    UseDualStack: await value('useDualstackEndpoint'),
    ForcePathStyle: await value('forcePathStyle'),
    Accelerate: await value('useAccelerateEndpoint'),
    UseArnRegion: await value('useArnRegion'),
    DisableMultiRegionAccessPoints: await value('disableMultiregionAccessPoints'),
    UseGlobalEndpoint: await value('useGlobalEndpoint'),
    Endpoint: endpoint,
  };
  const provider = config.endpointProvider as (
    p: typeof params,
    c: object,
  ) => {
    url: URL;
    properties?: { authSchemes?: { name?: string; signingRegion?: string; signingName?: string }[] };
    headers?: Record<string, string[]>;
  };
  const resolved = provider(params, {});
  const scheme = resolved.properties?.authSchemes?.[0];
  if (scheme && (scheme.name !== 'sigv4' || (scheme.signingName ?? 's3') !== 's3')) return undefined;
  const url = resolved.url;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(resolved.headers ?? {})) headers[k.toLowerCase()] = v.join(',');
  return {
    protocol: url.protocol,
    host: url.host,
    hostname: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port ? Number(url.port) : undefined,
    basePath: url.pathname.replace(/\/+$/, ''),
    signingRegion: scheme?.signingRegion ?? String(params.Region),
    headers,
  };
}
