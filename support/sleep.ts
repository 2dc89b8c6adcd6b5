/**
 * The library's `sleep`, for what waits on time itself (a poll interval, a client's pause between pushes,
 * a modelled latency), never to order events in a test (a test waits on a signal).
 */
export { sleep } from '../lambda/lib/concurrency';
