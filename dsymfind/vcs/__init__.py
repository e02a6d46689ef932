"""Source control: how git is run, what publish records of a build, and the checkouts of a
build's commit the downloader makes and names (never on the helper's paths)."""
