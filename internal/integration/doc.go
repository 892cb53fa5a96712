// Package integration drives every service of the local stack
// (deploy/local) through the production clients: SQS, S3, MySQL, Redis, the
// Athena stand-in, the chat-history API and the LLM simulators. It holds
// only tests; they fail, never skip, when the stack is not running (start it
// with `make stack-up`).
package integration
