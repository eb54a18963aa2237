from memlife.cli import main

main()
