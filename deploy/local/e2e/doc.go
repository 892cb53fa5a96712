// Package e2e holds the end-to-end test of the whole pipeline on the local
// stack: the built batch, worker and consumer binaries run as processes
// over a window of the sample lake, through deploy/local/demo, and the
// test asserts what the issue promises (one verdict per published room, an
// inference-log row in the lake for every stage call, empty queues, no
// process left behind). It needs the stack (`make stack-up`) and fails
// without it. It lives in the deploy/local module because it drives the
// demo; the production module never imports it.
package e2e
