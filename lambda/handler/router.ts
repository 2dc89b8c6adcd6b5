/** Hands each event to the face of its trigger; the cold start happens when this module loads. */
import type { Context } from 'aws-lambda';
import { handleInvoke } from './invoke';
import { flushMetrics, logger } from './observability';
import { coldStart } from './runtime';
import { handleSchedule } from './schedule';
import { handleSqs } from './sqs';
import { triggerOf } from './triggers';

const rt = coldStart();

/** Routes an SQS batch, a scheduled event or a direct invoke; metrics are flushed after each invocation. */
export async function route(event: unknown, context: Context): Promise<unknown> {
  logger.addContext(context);
  try {
    const trigger = triggerOf(event);
    switch (trigger.kind) {
      case 'sqs':
        return await handleSqs(rt, trigger.event, context);
      case 'schedule':
        return await handleSchedule(rt, context);
      case 'invoke':
        return await handleInvoke(rt, trigger.request, context);
    }
  } catch (err) {
    // The Error itself, so Powertools logs its name, stack and cause; errorType is the name at a glance.
    logger.error('invocation failed', { errorType: (err as Error).name, error: err as Error });
    throw err;
  } finally {
    flushMetrics();
  }
}
