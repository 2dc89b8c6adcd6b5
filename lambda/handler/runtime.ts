/** What a cold start builds once: the checked configuration, the S3 seam and the queue for the handler's own messages. */
import { SQSClient } from '@aws-sdk/client-sqs';
import type { PublishOptions } from '../lib/publish-types';
import { S3Store } from '../lib/s3';
import { type HandlerConfig, parseConfig } from './config';
import { PublishFinisher } from './finish';
import { SelfQueue } from './messages';
import { lockOptions, logger } from './observability';

/** The handler's long-lived state. */
export interface Runtime {
  readonly config: HandlerConfig;
  readonly store: S3Store;
  /** Undefined without DATASTORE_QUEUE_URL: no delayed re-checks, no repair continuations. */
  readonly queue?: SelfQueue;
  /** Queues the finish of each publish that could be left half done; undefined without a queue. */
  readonly finisher?: PublishFinisher;
}

/**
 * Reads the environment and connects; bad configuration is logged as one line naming the variable
 * and fails the cold start, so the function never runs half-configured.
 */
export function coldStart(env: NodeJS.ProcessEnv = process.env): Runtime {
  let config: HandlerConfig;
  try {
    config = parseConfig(env);
  } catch (err) {
    logger.error(`Bad configuration: ${(err as Error).message}`, err as Error);
    throw err;
  }
  const store = S3Store.connect(config.s3, config.bucket);
  let queue: SelfQueue | undefined;
  if (config.queueUrl) {
    const endpoint = env.AWS_ENDPOINT_URL_SQS?.trim() || undefined;
    queue = new SelfQueue(new SQSClient({ region: config.s3.region, endpoint }), config.queueUrl);
  } else {
    logger.warn('DATASTORE_QUEUE_URL is not set: delayed re-checks, repair continuations and finishes of killed publishes are off');
  }
  return { config, store, queue, finisher: queue && new PublishFinisher(queue, config.finishDelaySeconds) };
}

/** Drifting keys of each kind a report names (and a heal keeps); the counts are always whole. */
export const SAMPLE_KEYS = 20;

/** How every trigger publishes: the configured lock wait, and a finish queued before each publish record. */
export function publishOptions(rt: Runtime): PublishOptions {
  return { lock: lockOptions(rt.config.lockWaitMs), beforeRecord: rt.finisher?.beforeRecord };
}
