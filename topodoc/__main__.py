from topodoc.cli import main

main()
