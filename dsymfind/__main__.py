from dsymfind.main import main

raise SystemExit(main())
