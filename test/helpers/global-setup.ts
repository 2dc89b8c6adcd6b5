import { rebuildIfStale } from './bundle';
import { startMoto } from '../../support/moto';
import { useRunTempDir } from './temp';

/**
 * Rebuilds the bundles when a source is newer (once, before any worker loads them), and starts one moto
 * server for the whole run, unless S3_TEST_ENDPOINT names another S3 API. Temporary files of the run go
 * to a folder of its own, checked empty at the end.
 */
export default async function globalSetup(): Promise<void> {
  rebuildIfStale();
  useRunTempDir();
  process.env.AWS_ACCESS_KEY_ID ??= 'testing';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'testing';
  process.env.AWS_REGION ??= 'us-east-1';
  delete process.env.AWS_PROFILE;
  // The SDK warns about Node 20 on every client; the tests run on 20 on purpose.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  if (process.env.S3_TEST_ENDPOINT) return;
  const moto = await startMoto();
  process.env.S3_TEST_ENDPOINT = moto.endpoint;
  (globalThis as { __MOTO__?: typeof moto }).__MOTO__ = moto;
}
