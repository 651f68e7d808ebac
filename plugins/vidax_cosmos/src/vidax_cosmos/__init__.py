"""vidax-cosmos: Cosmos-Predict2.5 (and Cosmos3) world models for vidax (hooks in :mod:`vidax_cosmos.plugin`)."""
