// The bundled Lambda (dist/lambda/index.js) in a process of its own, so the chaos run can SIGKILL it.
// Reads one SQS event per line on stdin; writes one answer per line on fd 3: the handler's result, or its error.
'use strict';
const { writeSync } = require('node:fs');
const { createInterface } = require('node:readline');
const { handler } = require(process.argv[2]);

function context() {
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'datastore-indexer-chaos',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:datastore-indexer-chaos',
    memoryLimitInMB: '1024',
    awsRequestId: `chaos-${Date.now()}`,
    logGroupName: '/aws/lambda/datastore-indexer-chaos',
    logStreamName: 'chaos',
    getRemainingTimeInMillis: () => 300000,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

const lines = createInterface({ input: process.stdin });
let chain = Promise.resolve();
lines.on('line', (line) => {
  chain = chain.then(async () => {
    let answer;
    try {
      answer = { ok: true, result: await handler(JSON.parse(line), context()) };
    } catch (err) {
      answer = { ok: false, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
    }
    writeSync(3, `${JSON.stringify(answer)}\n`);
  });
});
lines.on('close', () => void chain.then(() => process.exit(0)));
