package repository

// fenceGuard admits a batch fenced with f (first argument) when the stored
// fence is no newer, or lies above f's backend's ceiling (second argument,
// service.FenceCeiling(f)): it was issued by the other lock backend.
const fenceGuard = "(fence <= ? OR fence > ?)"
