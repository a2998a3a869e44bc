"""Backends behind fa3nn's one dispatch, in the order `auto` tries them (see fa3nn.dispatch)."""
