package streams

// Covers exposes covers to the external tests of stream reconciliation.
var Covers = covers
