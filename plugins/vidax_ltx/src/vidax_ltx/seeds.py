"""The seeded keys of the conditioning items' own random draws (shared by the conditioning and the VAE encode)."""


def item_key(seed: int, salt: int, item: int):
    """The key of conditioning item ``item``'s draw ``salt`` (3: its posterior sample, 4: its extra tokens' noise):
    ``fold_in(key(seed), salt)``, folded with the item's index for every item after the first."""
    import jax

    key = jax.random.fold_in(jax.random.key(seed), salt)
    return key if item == 0 else jax.random.fold_in(key, item)
