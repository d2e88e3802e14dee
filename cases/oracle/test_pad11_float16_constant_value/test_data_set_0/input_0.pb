
BxJQฤ[Fฤ…Aบย่B