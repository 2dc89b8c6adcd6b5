/**
 * Resolves after `ms` milliseconds: for what waits on time itself (a poll interval, a client's pause
 * between pushes, a modelled latency), never to order events in a test (a test waits on a signal).
 */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
