import type { MotoServer } from './moto';

/** Stops the moto server the global setup started. */
export default async function globalTeardown(): Promise<void> {
  const moto = (globalThis as { __MOTO__?: MotoServer }).__MOTO__;
  if (moto) await moto.stop();
}
