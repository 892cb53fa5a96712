// Package moderation is the moderators' side of chatguard as a domain of
// its own: the queue items and filters a console lists, the takes that
// keep two moderators off one item, the decisions and the feedback outbox
// their lake events go through, accounts and campaigns as moderators see
// them, the audit sample of clean verdicts, and the audit record every
// console action writes before it acts.
//
// It declares the ports the console needs (Queue, Verdicts, Decisions,
// Takes, Accounts, FeedbackOutbox, ActionLog; Store is all of them), each
// with its error and concurrency contract. storage/mysql implements them;
// moderation/moderationtest holds one conformance suite per port and an
// in-memory fake that passes them. The console depends on this package
// and pipeline only, never on an adapter.
package moderation
