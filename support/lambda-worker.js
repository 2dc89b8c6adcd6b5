// One warm Lambda instance for the emulated event source (event-source.ts): loads the bundle once,
// with the environment its parent gave it, and runs one invocation per IPC message.
'use strict';

const { handler } = require(process.env.LAMBDA_BUNDLE);

process.on('message', async ({ id, event, timeoutMs }) => {
  const deadline = Date.now() + timeoutMs;
  const context = {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'datastore-indexer-emulated',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:datastore-indexer-emulated',
    memoryLimitInMB: '1024',
    awsRequestId: `req-${id}-${process.pid}`,
    logGroupName: '/aws/lambda/datastore-indexer-emulated',
    logStreamName: String(process.pid),
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
  try {
    const result = await handler(event, context);
    process.send({ id, result });
  } catch (err) {
    process.send({ id, error: err instanceof Error ? err.message : String(err) });
  }
});
