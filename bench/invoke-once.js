// One cold invocation of the bundle (`dist/lambda/index.js`) for the benchmark's ten-million-object row:
// the event comes as JSON in INVOKE_EVENT, the remaining-time clock starts at INVOKE_TIMEOUT_MS, and the
// handler's result and this process's peak RSS are written as JSON to INVOKE_RESULT_FILE.
'use strict';

const started = Date.now();
const { handler } = require(process.env.LAMBDA_BUNDLE);

async function main() {
  const deadline = started + Number(process.env.INVOKE_TIMEOUT_MS);
  const context = {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'datastore-indexer-bench',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:datastore-indexer-bench',
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsRequestId: `bench-${process.pid}`,
    logGroupName: '/aws/lambda/datastore-indexer-bench',
    logStreamName: String(process.pid),
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
  const result = await handler(JSON.parse(process.env.INVOKE_EVENT), context);
  const peakRssMb = process.resourceUsage().maxRSS / 1024;
  require('node:fs').writeFileSync(
    process.env.INVOKE_RESULT_FILE,
    JSON.stringify({ result, peakRssMb, seconds: (Date.now() - started) / 1000 }),
  );
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ? err.stack : String(err)}\n`);
  process.exit(1);
});
