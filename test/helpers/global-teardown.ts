import type { MotoServer } from '../../support/moto';
import { removeRunTempDir } from './temp';

/** Stops the moto server the global setup started, then checks the tests left no temporary files. */
export default async function globalTeardown(): Promise<void> {
  const moto = (globalThis as { __MOTO__?: MotoServer }).__MOTO__;
  if (moto) await moto.stop();
  removeRunTempDir();
}
