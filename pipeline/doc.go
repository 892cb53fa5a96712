// Package pipeline holds chatguard's domain and engine: the review event and
// verdict types, the typed errors that decide retry behaviour, and the
// interfaces the engine needs from the outside world (ChatSource,
// VerdictStore and VerdictReviser, EventSink, and the queue: Receiver, Acker, Sender). Adapters
// live in packages named for what they talk to (storage/mysql,
// storage/s3lake, storage/sqs, ...) and assert that they satisfy these
// interfaces.
package pipeline
