"""What a cell is, resolved once from its composed config: its spec (family, placement, kind), its
limits, its children's environment, its GPU settings and its fairseq command lines."""
