"""S3-compatible stores: the kind (store.py), its own small client (api.py), the signer of a
GET (presign.py with keys.py and sigv4.py), and the create-only writer (upload.py)."""
