package audit

// Begin opens the audit's transaction, for the test that writes in it.
var Begin = begin

// OutboxPaged is Outbox reading pageRows rows a snapshot.
var OutboxPaged = outbox
